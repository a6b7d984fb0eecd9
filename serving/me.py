"""The reader's own state in the JSON API: saved stories and read marks (bearer token; no one else's).

==========================================  ============================================================
``GET /v1/me/saved?limit=&offset=``         ``{"user", "count", "total", "stories": [story summary +
                                            "saved_at"]}``, newest saved first (a story merged since is
                                            shown as the story it was merged into)
``PUT /v1/me/saved/{story_id}``             saves a story: 200 ``{"story_id", "saved": true,
                                            "saved_at"}``; 404 unknown story; 409 ``saved_full`` past
                                            :data:`newsflow.storage.reader_state.MAX_SAVED`
``DELETE /v1/me/saved/{story_id}``          200 ``{"story_id", "saved": false, "was_saved": bool}``
``GET /v1/me/read``                         ``{"user", "count", "read": [{"story_id", "read_at",
                                            "reports"}]}``, newest read first
``PUT /v1/me/read/{story_id}``              marks it read now (with its independent reports now): 200
                                            ``{"story_id", "read": true, "read_at", "reports"}``
``DELETE /v1/me/read/{story_id}``           200 ``{"story_id", "read": false, "was_read": bool}``
==========================================  ============================================================

A ``click`` event (``POST /v1/events``) and an opened full-coverage web page mark a story read too. Every
answer is ``private, no-store``; the reader is the bearer token's (:meth:`newsflow.serving.app.Api._user`),
never a parameter, so a reader's saved stories and read marks are reachable by that reader only.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from newsflow.serving.http_cache import json_bytes
from newsflow.serving.pages import coverage_page
from newsflow.serving.reader_view import ReaderView
from newsflow.serving.resilience import REDIS_ERRORS
from newsflow.serving.web_view import coverage_context
from newsflow.storage.events import is_valid_story_id
from newsflow.storage.reader_state import MAX_SAVED, SavedFull


def personal_coverage(rec, articles, view: ReaderView) -> dict:
    """A story's full coverage as the reader sees it: articles of blocked outlets and muted headlines left out
    of the reports, sources and counts (:meth:`ReaderView.articles`), ``lead`` the article that leads for them
    (``prefer_sources``, then the representative unless blocked, free before paywalled:
    :func:`newsflow.serving.web_view.coverage_context`; ``None`` when every outlet is blocked), and ``read`` /
    ``saved`` marks."""
    arts = view.articles(articles)
    cov = coverage_page(rec.summary(), rec.entities, arts)
    lead = coverage_context(cov, arts, view.profile, view.prefer)["lead"]
    cov["lead"] = lead["article"] if lead else None
    return view.marked(cov)


def live_records(api, story_ids) -> dict:
    """``{asked id: live StoryRecord}`` (a merged story resolves to the story it was merged into; unknown ids
    are left out). Redis errors propagate."""
    ids = list(story_ids)
    recs = dict(zip(ids, api.store.get_stories(ids), strict=True))
    merged = {sid: r.merged_into for sid, r in recs.items() if r is not None and r.merged_into}
    if merged:
        targets = dict(zip(merged.values(), api.store.get_stories(list(merged.values())), strict=True))
        for sid, into in merged.items():
            recs[sid] = targets.get(into)
    return {sid: r for sid, r in recs.items() if r is not None and not r.merged_into}


def mark_read_now(api, user: str, story_ids, now: float) -> dict:
    """Marks stories read at ``now`` with their independent reports now; returns ``{story id: record}`` of
    those marked (live ones; a merged story marks the story it was merged into)."""
    recs = {r.story_id: r for r in live_records(api, story_ids).values()}
    api.reader_state.mark_read(user, {sid: (now, int(r.independent_count or 0)) for sid, r in recs.items()})
    return recs


class Me:
    """Handlers of the ``/v1/me/saved`` and ``/v1/me/read`` routes over an :class:`newsflow.serving.app.Api`."""

    def __init__(self, api):
        self.api = api

    def _answer(self, payload: dict, status: int = 200) -> Response:
        return Response(
            json_bytes(payload),
            status_code=status,
            media_type="application/json",
            headers={"Cache-Control": "private, no-store"},
        )

    def _story_id(self, request: Request) -> str:
        from newsflow.serving.app import ApiError

        sid = request.path_params["story_id"]
        if not is_valid_story_id(sid):
            raise ApiError(400, "bad_parameter", f"story id must be 1-128 chars of [A-Za-z0-9_.:-], got {sid!r}")
        return sid

    async def _run(self, fn, *args):
        """``fn(*args)`` in the thread pool behind the API's Redis breaker (503 when Redis is down)."""
        from newsflow.serving.app import ApiError

        try:
            self.api._guard()
            return await run_in_threadpool(fn, *args)
        except REDIS_ERRORS as e:
            self.api._mark_down()
            raise ApiError(
                503, "unavailable", f"reader store unavailable: {type(e).__name__}", {"Retry-After": "5"}
            ) from None

    def _offset(self, request: Request) -> int:
        from newsflow.serving.app import ApiError

        raw = request.query_params.get("offset", "0")
        if not raw.isascii() or not raw.isdigit() or int(raw) > MAX_SAVED:
            raise ApiError(400, "bad_parameter", f"offset must be an integer in [0, {MAX_SAVED}], got {raw!r}")
        return int(raw)

    async def saved(self, request: Request) -> Response:
        user = self.api._user(request)
        limit, offset = self.api._limit(request), self._offset(request)

        def read() -> dict:
            rows = self.api.reader_state.saved(user, offset, limit)
            total = self.api.reader_state.saved_count(user)
            recs = live_records(self.api, [sid for sid, _ in rows])
            stories = [dict(recs[sid].summary(), saved_at=t) for sid, t in rows if sid in recs]
            return {"user": user, "count": len(stories), "total": int(total), "offset": offset, "stories": stories}

        return self._answer(await self._run(read))

    async def save(self, request: Request) -> Response:
        from newsflow.serving.app import ApiError

        user, sid = self.api._user(request), self._story_id(request)
        now = self.api._ranking_now()

        def save() -> dict | None:
            rec = live_records(self.api, [sid]).get(sid)
            if rec is None:
                return None
            at = self.api.reader_state.save(user, rec.story_id, now)
            return {"story_id": rec.story_id, "saved": True, "saved_at": at}

        try:
            out = await self._run(save)
        except SavedFull as e:
            raise ApiError(409, "saved_full", str(e)) from None
        if out is None:
            raise ApiError(404, "not_found", f"no story {sid!r}")
        return self._answer(out)

    async def unsave(self, request: Request) -> Response:
        user, sid = self.api._user(request), self._story_id(request)
        was = await self._run(self.api.reader_state.unsave, user, sid)
        return self._answer({"story_id": sid, "saved": False, "was_saved": was})

    async def read(self, request: Request) -> Response:
        user = self.api._user(request)
        marks = await self._run(self.api.reader_state.read_marks, user)
        rows = sorted(marks.items(), key=lambda kv: (-kv[1].at, kv[0]))
        read = [{"story_id": sid, "read_at": m.at, "reports": m.reports} for sid, m in rows]
        return self._answer({"user": user, "count": len(read), "read": read})

    async def mark_read(self, request: Request) -> Response:
        from newsflow.serving.app import ApiError

        user, sid = self.api._user(request), self._story_id(request)
        now = self.api._ranking_now()
        recs = await self._run(mark_read_now, self.api, user, [sid], now)
        if not recs:
            raise ApiError(404, "not_found", f"no story {sid!r}")
        rec = next(iter(recs.values()))
        self.api.personal.pages.forget(user)
        return self._answer({"story_id": rec.story_id, "read": True, "read_at": now, "reports": rec.independent_count})

    async def mark_unread(self, request: Request) -> Response:
        user, sid = self.api._user(request), self._story_id(request)
        was = await self._run(self.api.reader_state.mark_unread, user, [sid])
        self.api.personal.pages.forget(user)
        return self._answer({"story_id": sid, "read": False, "was_read": bool(was)})


def me_routes(api) -> list[Route]:
    """The routes of the module docstring for :func:`newsflow.serving.app.create_app`."""
    me = Me(api)
    return [
        Route("/v1/me/saved", me.saved, methods=["GET"]),
        Route("/v1/me/saved/{story_id}", me.save, methods=["PUT"]),
        Route("/v1/me/saved/{story_id}", me.unsave, methods=["DELETE"]),
        Route("/v1/me/read", me.read, methods=["GET"]),
        Route("/v1/me/read/{story_id}", me.mark_read, methods=["PUT"]),
        Route("/v1/me/read/{story_id}", me.mark_unread, methods=["DELETE"]),
    ]
