"""OpenAPI 3.1 description of the admin API (:mod:`newsflow.serving.admin`), merged into the document of
:mod:`newsflow.serving.openapi`: the ``/v1/admin/...`` path items (sources, readers, audit) and the ``adminToken``
security scheme."""

from __future__ import annotations

from newsflow.serving.admin import MAX_LIMIT
from newsflow.storage.source_registry import STATUSES


def admin_openapi_paths() -> dict:
    """OpenAPI 3.1 path items of the admin routes (merged into ``serving/openapi.py``'s document)."""
    err = {"$ref": "#/components/responses/Error"}
    sec = [{"adminToken": []}]
    ref = {
        "name": "ref",
        "in": "path",
        "required": True,
        "schema": {"type": "string"},
        "description": "feed id or outlet",
    }
    report = {
        "description": "one outcome per entry",
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "outcomes": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "ref": {"type": "string"},
                                    "url": {"type": "string"},
                                    "feed_id": {"type": "string"},
                                    "result": {
                                        "type": "string",
                                        "enum": [
                                            "added",
                                            "unchanged",
                                            "restored",
                                            "paused",
                                            "resumed",
                                            "removed",
                                            "error",
                                        ],
                                    },
                                    "detail": {"type": "string"},
                                },
                            },
                        },
                        "summary": {"type": "object", "additionalProperties": {"type": "integer"}},
                    },
                }
            }
        },
    }
    feed = {
        "type": "object",
        "required": ["url"],
        "properties": {
            "url": {"type": "string", "format": "uri"},
            "kind": {"type": "string", "enum": ["feed", "sitemap"], "default": "feed"},
            "title": {"type": "string"},
            "categories": {"type": "array", "items": {"type": "string"}},
            "html_url": {"type": "string"},
            "status": {"type": "string", "enum": ["active", "paused"], "default": "active"},
            "name": {"type": "string", "description": "outlet display name"},
            "tier": {"type": "string", "enum": ["wire", "record", "national", "popular", "low"]},
            "authority": {"type": "number", "minimum": 0, "maximum": 1, "description": "outlet authority override"},
            "language": {"type": "string"},
        },
    }
    errors = {"400": err, "401": err, "503": err}
    paging = [
        {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0, "default": 0}},
        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}},
    ]
    crawl = {
        "type": ["object", "null"],
        "description": "the crawl frontier's schedule of the feed (null until the frontier takes it)",
        "properties": {
            "due": {"type": ["number", "null"], "description": "next fetch, UTC epoch s (null while fetched)"},
            "interval_s": {"type": ["number", "null"]},
            "last_fetch": {"type": ["number", "null"], "description": "UTC epoch s"},
            "last_status": {"type": "string"},
            "failures": {"type": "integer", "description": "failed fetches in a row"},
            "errors": {"type": "integer", "description": "failed fetches in all"},
            "backoff_until": {"type": ["number", "null"], "description": "UTC epoch s"},
            "last_error": {"type": "string"},
            "fetches": {"type": "integer"},
            "items": {"type": "integer"},
        },
    }
    feed_row = {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "url": {"type": "string"},
            "kind": {"type": "string"},
            "outlet": {"type": "string"},
            "title": {"type": "string"},
            "status": {"type": "string", "enum": list(STATUSES)},
            "name": {"type": "string"},
            "tier": {"type": "string"},
            "authority": {"type": ["number", "null"]},
            "authority_source": {"type": "string"},
            "crawl": crawl,
        },
    }
    feeds_page = {
        "description": "a page of feeds",
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "feeds": {"type": "array", "items": feed_row},
                        "offset": {"type": "integer"},
                        "limit": {"type": "integer"},
                        "more": {"type": "boolean", "description": "a next page exists"},
                        "registered": {"type": "integer", "description": "feeds registered, removed ones included"},
                        "counts": {
                            "type": "object",
                            "additionalProperties": {"type": "integer"},
                            "description": "feeds per status",
                        },
                    },
                }
            }
        },
    }
    reader_row = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "role": {"type": "string", "enum": ["reader", "editor"]},
            "created": {"type": ["number", "null"], "description": "UTC epoch s"},
            "disabled": {"type": ["number", "null"], "description": "UTC epoch s since it is disabled"},
        },
    }
    audit_row = {
        "type": "object",
        "properties": {
            "time": {"type": "number", "description": "UTC epoch s"},
            "editor": {"type": "string", "description": "account name, or admin-token for the shared token"},
            "action": {"type": "string", "examples": ["sources.pause", "sources.import", "readers.disable"]},
            "target": {"type": "string"},
            "detail": {"type": "string"},
        },
    }

    def json_body(schema: dict) -> dict:
        return {"required": True, "content": {"application/json": {"schema": schema}}}

    def body_of(description: str, schema: dict) -> dict:
        return {"description": description, "content": {"application/json": {"schema": schema}}}

    def listing(description: str, field: str, row: dict, total: str) -> dict:
        """A page of ``row`` objects under ``field`` with ``total`` (the number of all of them) and the paging."""
        props = {field: {"type": "array", "items": row}, total: {"type": "integer"}}
        props.update(offset={"type": "integer"}, limit={"type": "integer"})
        return body_of(description, {"type": "object", "properties": props})

    return {
        "/v1/admin/sources": {
            "get": {
                "summary": "registered feeds (admin)",
                "security": sec,
                "parameters": [
                    {"name": "status", "in": "query", "schema": {"type": "string", "enum": list(STATUSES)}},
                    {
                        "name": "search",
                        "in": "query",
                        "schema": {"type": "string"},
                        "description": "only the feeds of outlets whose name contains this (case-insensitive)",
                    },
                    {"name": "outlet", "in": "query", "schema": {"type": "string"}},
                    *paging,
                ],
                "responses": {"200": feeds_page, **errors},
            },
            "post": {
                "summary": "register feeds (admin)",
                "security": sec,
                "requestBody": json_body(
                    {"oneOf": [feed, {"type": "object", "properties": {"feeds": {"type": "array", "items": feed}}}]}
                ),
                "responses": {"200": report, "201": report, "422": report, "413": err, **errors},
            },
        },
        "/v1/admin/sources/import": {
            "post": {
                "summary": "import an OPML or CSV file (admin)",
                "security": sec,
                "requestBody": {
                    "required": True,
                    "content": {
                        "text/x-opml": {"schema": {"type": "string"}},
                        "text/csv": {"schema": {"type": "string"}},
                    },
                },
                "responses": {"200": report, "422": report, "413": err, **errors},
            }
        },
        "/v1/admin/sources/export": {
            "get": {
                "summary": "export the feeds as OPML or CSV (admin)",
                "security": sec,
                "parameters": [
                    {"name": "format", "in": "query", "schema": {"type": "string", "enum": ["opml", "csv"]}}
                ],
                "responses": {"200": {"description": "the file"}, **errors},
            }
        },
        "/v1/admin/sources/{ref}": {
            "get": {
                "summary": "feeds named by a feed id or outlet (admin)",
                "security": sec,
                "parameters": [ref],
                "responses": {"200": {"description": "feeds"}, "404": err, **errors},
            },
            "delete": {
                "summary": "remove (history kept) (admin)",
                "security": sec,
                "parameters": [ref],
                "responses": {"200": report, "404": err, **errors},
            },
        },
        "/v1/admin/sources/discover": {
            "post": {
                "summary": "add a publisher by home page: polite feed discovery, then registration (admin)",
                "security": sec,
                "requestBody": json_body(
                    {
                        "type": "object",
                        "required": ["url"],
                        "properties": {
                            "url": {"type": "string", "format": "uri"},
                            "paused": {"type": "boolean", "default": False},
                            "all": {"type": "boolean", "default": False, "description": "every feed found"},
                        },
                    }
                ),
                "responses": {"200": report, "201": report, "422": report, "413": err, **errors},
            }
        },
        "/v1/admin/readers": {
            "get": {
                "summary": "account count and accounts by name prefix (admin)",
                "security": sec,
                "parameters": [{"name": "q", "in": "query", "schema": {"type": "string"}}, *paging],
                "responses": {
                    "200": listing("accounts (count: all of them)", "readers", reader_row, "count"),
                    **errors,
                },
            }
        },
        "/v1/admin/readers/{name}/{action}": {
            "post": {
                "summary": "disable (no sign-in, sessions end, tokens refused) or enable an account (admin)",
                "security": sec,
                "parameters": [
                    {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
                    {
                        "name": "action",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string", "enum": ["disable", "enable"]},
                    },
                ],
                "responses": {
                    "200": body_of(
                        "the account's state",
                        {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string"},
                                "disabled": {"type": "boolean"},
                                "changed": {"type": "boolean"},
                            },
                        },
                    ),
                    "404": err,
                    "409": err,
                    **errors,
                },
            }
        },
        "/v1/admin/audit": {
            "get": {
                "summary": "the audit log of admin actions, newest first (admin)",
                "security": sec,
                "parameters": paging,
                "responses": {
                    "200": listing("audit records (count: all kept)", "records", audit_row, "count"),
                    **errors,
                },
            }
        },
        "/v1/admin/sources/{ref}/{action}": {
            "post": {
                "summary": "pause, resume or remove (admin)",
                "security": sec,
                "parameters": [
                    ref,
                    {
                        "name": "action",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string", "enum": ["pause", "resume", "remove"]},
                    },
                ],
                "responses": {"200": report, "404": err, **errors},
            }
        },
    }


ADMIN_SECURITY_SCHEME = {
    "type": "http",
    "scheme": "bearer",
    "description": (
        "an editor's personal API token, or the NEWSFLOW_ADMIN_TOKEN setting "
        "(readers' and operator tokens are not accepted)"
    ),
}
