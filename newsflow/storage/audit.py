"""The editors' audit log: every admin action (pages and API) with the editor's name and the time.

One capped Redis LIST, :attr:`newsflow.storage.keys.Keys.admin_audit`, newest first; each member is the JSON
``{"time": UTC epoch s, "editor": account name (or "admin-token" for the shared NEWSFLOW_ADMIN_TOKEN),
"action": "sources.pause" ..., "target": what it acted on, "detail": short outcome}``.
"""

from __future__ import annotations

import json

from newsflow.storage.keys import Keys

AUDIT_CAP = 100_000
MAX_FIELD = 300


class AuditLog:
    """Append and read the audit records over one redis-py client.

    Args:
      client: redis-py client.
      keys: the key layout.
    """

    def __init__(self, client, keys: Keys = Keys()):
        self.client = client
        self.keys = keys

    def record(self, editor: str, action: str, target: str, detail: str, now: float) -> dict:
        """Appends one record (fields cut to 300 characters) and returns it."""
        rec = {
            "time": float(now),
            "editor": str(editor)[:MAX_FIELD],
            "action": str(action)[:MAX_FIELD],
            "target": str(target)[:MAX_FIELD],
            "detail": str(detail)[:MAX_FIELD],
        }
        pipe = self.client.pipeline(transaction=False)
        pipe.lpush(self.keys.admin_audit, json.dumps(rec, ensure_ascii=False))
        pipe.ltrim(self.keys.admin_audit, 0, AUDIT_CAP - 1)
        pipe.execute()
        return rec

    def recent(self, offset: int = 0, limit: int = 50) -> list[dict]:
        """Records newest first, ``limit`` from ``offset``."""
        return [json.loads(r) for r in self.client.lrange(self.keys.admin_audit, offset, offset + limit - 1)]

    def count(self) -> int:
        """Number of records kept."""
        return int(self.client.llen(self.keys.admin_audit))
