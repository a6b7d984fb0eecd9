"""OpenAPI 3.1 description of the sources admin API (:mod:`newsflow.serving.admin`), merged into the document
of :mod:`newsflow.serving.openapi`: the ``/v1/admin/sources`` path items and the ``adminToken`` security scheme."""

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
    return {
        "/v1/admin/sources": {
            "get": {
                "summary": "registered feeds (admin)",
                "security": sec,
                "parameters": [
                    {"name": "status", "in": "query", "schema": {"type": "string", "enum": list(STATUSES)}},
                    {"name": "outlet", "in": "query", "schema": {"type": "string"}},
                    {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0, "default": 0}},
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}},
                ],
                "responses": {"200": {"description": "feeds"}, **errors},
            },
            "post": {
                "summary": "register feeds (admin)",
                "security": sec,
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "oneOf": [
                                    feed,
                                    {"type": "object", "properties": {"feeds": {"type": "array", "items": feed}}},
                                ]
                            }
                        }
                    },
                },
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
