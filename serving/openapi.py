"""OpenAPI 3.1 description of the newsflow API (served at ``GET /openapi.json``)."""

from __future__ import annotations

from functools import lru_cache

from newsflow.serving.admin_openapi import ADMIN_SECURITY_SCHEME, admin_openapi_paths


def _q(name: str, schema: dict, description: str) -> dict:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


def _p(name: str, schema: dict, description: str) -> dict:
    return {"name": name, "in": "path", "required": True, "schema": schema, "description": description}


LIMIT = _q("limit", {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}, "stories per page")
HIDE_READ = _q(
    "hide_read",
    {"type": "string", "enum": ["0", "1", "true", "false"]},
    "with a bearer token: 1 leaves out the stories the reader read (without it they carry read: true)",
)
CURSOR = _q(
    "cursor",
    {"type": "string", "maxLength": 200},
    "the page after the one whose next_cursor this is (absent: the first page; another value is 400 `bad_cursor`)",
)
EDITION = _q(
    "edition",
    {"type": "string", "pattern": r"^(global|[a-z]{2,3}(-[a-z0-9]{2,8})?)$", "default": "global"},
    "edition: 'global' or a language code such as 'en' that has a feed (another code is 400 `unknown_edition`, "
    "its message lists the editions)",
)
ERR = {"$ref": "#/components/responses/Error"}
STALE = {
    "X-Newsflow-Stale": {
        "schema": {"type": "string", "enum": ["1"]},
        "description": "present when served from the last good snapshot",
    },
    "X-Newsflow-Stale-Reason": {
        "schema": {"type": "string"},
        "description": "redis-unavailable, feed-missing or feed-corrupt",
    },
    "ETag": {"schema": {"type": "string"}},
    "Cache-Control": {"schema": {"type": "string"}},
}


def _ok(schema_ref: str, description: str) -> dict:
    return {
        "description": description,
        "headers": STALE,
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema_ref}"}}},
    }


NOT_MODIFIED = {"description": "not modified (If-None-Match matched the ETag)"}
BEARER = [{"bearerToken": []}]


@lru_cache(maxsize=1)
def openapi_schema() -> dict:
    """The OpenAPI document (a fresh-enough constant; cached)."""
    story = {
        "type": "object",
        "properties": {
            "story_id": {"type": "string"},
            "title": {"type": "string"},
            "url": {"type": "string"},
            "domain": {"type": "string", "description": "representative source domain"},
            "topics": {
                "type": "array",
                "items": {"type": "string"},
                "description": "sections (World, Nation, Business, Technology, Entertainment, Sports, Science, "
                "Health, Politics); topic pages and follows use these",
            },
            "types": {
                "type": "array",
                "items": {"type": "string", "enum": ["obituary", "explainer", "historical"]},
                "description": "article types of at least half the story's reports; never topics",
            },
            "languages": {"type": "array", "items": {"type": "string"}},
            "article_count": {"type": "integer"},
            "source_count": {"type": "integer"},
            "independent_count": {"type": "integer"},
            "earliest_time": {"type": "number", "description": "UTC epoch seconds"},
            "latest_time": {"type": "number", "description": "UTC epoch seconds"},
            "authority": {"type": "number"},
            "image": {
                "type": "string",
                "description": "the lead article's picture, a name served at /img/<name> (WebP, its size in the name: "
                "<hash>-<width>x<height>.webp); empty when none",
            },
            "icon": {
                "type": "string",
                "description": "the lead outlet's icon, served at /img/<name> (WebP, at most 32 px); empty when none",
            },
            "score": {"type": "number"},
            "relevance": {"type": ["number", "null"]},
            "breaking": {"type": "boolean"},
            "injected": {"type": "boolean", "description": "breaking story injected on request"},
            "read": {"type": "boolean", "description": "the bearer-token reader read it (answers with a token)"},
            "saved": {"type": "boolean", "description": "the bearer-token reader saved it"},
            "new_since_read": {
                "type": "integer",
                "description": "/v1/feed: a read story shown again because it has this many new independent reports",
            },
        },
        "required": ["story_id", "title", "url", "domain"],
    }
    page = {
        "type": "object",
        "properties": {
            "generated_at": {"type": ["number", "null"]},
            "stale": {"type": "boolean"},
            "count": {"type": "integer"},
            "stories": {"type": "array", "items": {"$ref": "#/components/schemas/Story"}},
            "next_cursor": {
                "type": ["string", "null"],
                "description": "the cursor of the next page (null on the last; /v1/top and /v1/topics/{topic})",
            },
        },
    }
    str_list = {"type": "array", "maxItems": 200, "items": {"type": "string", "maxLength": 253}}
    prefs_in = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "follow_topics": dict(str_list, description="topic labels (lower case)"),
            "follow_sources": dict(str_list, description="outlets: registrable domains, or hosts/URLs to reduce"),
            "block_topics": dict(str_list, description="topic labels (lower case)"),
            "block_sources": dict(str_list, description="outlets: registrable domains, or hosts/URLs to reduce"),
            "prefer_sources": dict(str_list, description="outlets whose report leads a story's full coverage"),
            "dismiss_topics": dict(str_list, description="inferred interests removed from the For You page"),
            "mute_words": dict(
                str_list,
                description="muted words and phrases (case-insensitive, whole words, any script; at most 100 "
                "characters each): their stories and articles are hidden on every surface",
            ),
        },
    }
    sid_param = _p("story_id", {"type": "string", "pattern": r"^[A-Za-z0-9_.:-]{1,128}$"}, "story id")
    private_json = {"description": "done", "content": {"application/json": {"schema": {"type": "object"}}}}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "newsflow API",
            "version": "1",
            "description": "Fresh, diverse news feeds from stories.",
        },
        "paths": {
            **admin_openapi_paths(),
            "/v1/top": {
                "get": {
                    "summary": "Top stories of an edition",
                    "parameters": [EDITION, LIMIT, HIDE_READ, CURSOR],
                    "responses": {"200": _ok("FeedPage", "feed page"), "304": NOT_MODIFIED, "400": ERR},
                }
            },
            "/v1/topics/{topic}": {
                "get": {
                    "summary": "Top stories of a topic",
                    "parameters": [
                        _p("topic", {"type": "string", "maxLength": 64}, "topic label"),
                        LIMIT,
                        HIDE_READ,
                        CURSOR,
                    ],
                    "responses": {
                        "200": _ok("FeedPage", "feed page (empty for a label of the topic model without stories)"),
                        "304": NOT_MODIFIED,
                        "400": ERR,
                        "404": ERR,  # no stories carry the topic and the topic model cannot assign it
                    },
                }
            },
            "/v1/trending": {
                "get": {
                    "summary": "Trending stories, entities and topics; breaking stories",
                    "parameters": [LIMIT, HIDE_READ],
                    "responses": {"200": _ok("Trending", "latest window"), "304": NOT_MODIFIED, "400": ERR},
                }
            },
            "/v1/stories/{story_id}": {
                "get": {
                    "summary": "Full coverage of a story: every source, "
                    "independent reports apart from syndicated copies",
                    "parameters": [
                        _p("story_id", {"type": "string", "pattern": r"^[A-Za-z0-9_.:-]{1,128}$"}, "story id")
                    ],
                    "responses": {
                        "200": _ok("StoryCoverage", "coverage"),
                        "301": {"description": "story merged into another"},
                        "304": NOT_MODIFIED,
                        "400": ERR,
                        "404": ERR,
                        "503": ERR,
                    },
                }
            },
            "/v1/feed": {
                "get": {
                    "summary": "The reader's personal feed (reader from the bearer token): a read story comes back "
                    "only with new independent reports (marked read, new_since_read); stories of removed interests "
                    "placed by inference, blocked and muted stories are left out",
                    "security": BEARER,
                    "parameters": [EDITION, LIMIT, HIDE_READ, CURSOR],
                    "responses": {"200": _ok("FeedPage", "personal feed"), "304": NOT_MODIFIED, "400": ERR, "401": ERR},
                }
            },
            "/v1/me/preferences": {
                "get": {
                    "summary": "The reader's followed and blocked topics and outlets",
                    "security": BEARER,
                    "responses": {
                        "200": {
                            "description": "preferences",
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Preferences"}}},
                        },
                        "304": NOT_MODIFIED,
                        "401": ERR,
                        "503": ERR,
                    },
                },
                "put": {
                    "summary": "Replace some preference lists (absent fields are kept). Sources are stored as "
                    "outlets (registrable domains: uk.reuters.com becomes reuters.com); following and blocking "
                    "the same topic or outlet, preferring a blocked outlet or dismissing a followed topic is "
                    "refused. Blocks apply to every surface the reader sees.",
                    "security": BEARER,
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PreferencesIn"}}},
                    },
                    "responses": {
                        "200": {
                            "description": "the stored preferences",
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Preferences"}}},
                        },
                        "400": ERR,
                        "401": ERR,
                        "413": ERR,
                        "415": ERR,
                        "503": ERR,
                    },
                },
            },
            "/v1/search": {
                "get": {
                    "summary": "Full-text search over stories and their articles, results grouped by story (story "
                    "fields + matches + articles); blocks, muted words and read marks of a bearer-token reader hold",
                    "parameters": [
                        _q("q", {"type": "string", "minLength": 1, "maxLength": 200}, "words (all must match)"),
                        _q("topic", {"type": "string"}, "topic label"),
                        _q("outlet", {"type": "string"}, "outlet (registrable domain, or a host/URL to reduce)"),
                        _q("language", {"type": "string", "pattern": "^[a-z]{2,3}$"}, "ISO 639 language code"),
                        _q("since", {"type": "string", "format": "date"}, "first UTC day, YYYY-MM-DD"),
                        _q("until", {"type": "string", "format": "date"}, "last UTC day, YYYY-MM-DD"),
                        LIMIT,
                        _q("cursor", {"type": "string", "maxLength": 512}, "the 'next' of the previous page"),
                        HIDE_READ,
                    ],
                    "responses": {"200": private_json, "304": NOT_MODIFIED, "400": ERR, "401": ERR, "503": ERR},
                }
            },
            "/v1/me/saved": {
                "get": {
                    "summary": "The reader's saved stories, newest saved first (story fields + saved_at)",
                    "security": BEARER,
                    "parameters": [LIMIT, _q("offset", {"type": "integer", "minimum": 0}, "stories to skip")],
                    "responses": {"200": private_json, "400": ERR, "401": ERR, "503": ERR},
                }
            },
            "/v1/me/saved/{story_id}": {
                "put": {
                    "summary": "Save a story (a merged story saves the story it was merged into)",
                    "security": BEARER,
                    "parameters": [sid_param],
                    "responses": {"200": private_json, "400": ERR, "401": ERR, "404": ERR, "409": ERR, "503": ERR},
                },
                "delete": {
                    "summary": "Unsave a story",
                    "security": BEARER,
                    "parameters": [sid_param],
                    "responses": {"200": private_json, "400": ERR, "401": ERR, "503": ERR},
                },
            },
            "/v1/me/read": {
                "get": {
                    "summary": "The reader's read marks, newest first: story_id, read_at, reports (independent "
                    "reports then). A click event or an opened coverage page marks a story read",
                    "security": BEARER,
                    "responses": {"200": private_json, "401": ERR, "503": ERR},
                }
            },
            "/v1/me/read/{story_id}": {
                "put": {
                    "summary": "Mark a story read now",
                    "security": BEARER,
                    "parameters": [sid_param],
                    "responses": {"200": private_json, "400": ERR, "401": ERR, "404": ERR, "503": ERR},
                },
                "delete": {
                    "summary": "Mark a story unread",
                    "security": BEARER,
                    "parameters": [sid_param],
                    "responses": {"200": private_json, "400": ERR, "401": ERR, "503": ERR},
                },
            },
            "/v1/events": {
                "post": {
                    "summary": "Record impression/click/dwell events",
                    "security": BEARER,
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["events"],
                                    "properties": {
                                        "events": {
                                            "type": "array",
                                            "minItems": 1,
                                            "maxItems": 100,
                                            "items": {"$ref": "#/components/schemas/Event"},
                                        }
                                    },
                                }
                            }
                        },
                    },
                    "responses": {
                        "202": {"description": "accepted"},
                        "400": ERR,
                        "401": ERR,
                        "413": ERR,
                        "415": ERR,
                        "503": ERR,
                    },
                }
            },
        },
        "components": {
            "securitySchemes": {
                "adminToken": ADMIN_SECURITY_SCHEME,
                "bearerToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": (
                        "nf1.<payload>.<HMAC-SHA256> token: a reader's personal API token (created and revoked on "
                        "the /account page) or an operator token (newsflow serve --mint-token); a web session "
                        "cookie is not accepted"
                    ),
                },
            },
            "responses": {
                "Error": {
                    "description": "error",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "error": {
                                        "type": "object",
                                        "properties": {
                                            "code": {"type": "string"},
                                            "message": {"type": "string"},
                                            "details": {"type": "array"},
                                        },
                                    }
                                },
                            }
                        }
                    },
                }
            },
            "schemas": {
                "Story": story,
                "FeedPage": page,
                "Trending": {
                    "type": "object",
                    "properties": {
                        "window_end": {"type": ["number", "null"]},
                        "stale": {"type": "boolean"},
                        "stories": {"type": "array", "items": {"$ref": "#/components/schemas/Story"}},
                        "entities": {
                            "type": "array",
                            "description": "chips {entity, key, new_articles}; the web links each to /entities/{key}",
                        },
                        "topics": {"type": "array"},
                        "breaking": {"type": "array", "items": {"$ref": "#/components/schemas/Story"}},
                    },
                },
                "StoryCoverage": {
                    "allOf": [
                        {"$ref": "#/components/schemas/Story"},
                        {
                            "type": "object",
                            "properties": {
                                "coverage": {"type": "object"},
                                "sources": {"type": "array"},
                                "reports": {"type": "array"},
                                "by_language": {
                                    "type": "array",
                                    "description": "reports grouped by the language of their lead article: "
                                    "language, reports (cluster ids), articles, outlets",
                                },
                            },
                        },
                    ]
                },
                "PreferencesIn": prefs_in,
                "Preferences": {
                    "allOf": [
                        {"$ref": "#/components/schemas/PreferencesIn"},
                        {"type": "object", "properties": {"user": {"type": "string"}}},
                    ]
                },
                "Event": {
                    "type": "object",
                    "required": ["type", "story_id"],
                    "properties": {
                        "type": {"type": "string", "enum": ["impression", "click", "dwell"]},
                        "story_id": {"type": "string"},
                        "time": {"type": "number"},
                        "position": {"type": "integer", "minimum": 0},
                        "dwell_seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 86400},
                        "surface": {"type": "string", "enum": ["top", "topic", "trending", "story", "feed"]},
                    },
                },
            },
        },
    }
