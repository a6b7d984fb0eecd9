"""newsflow.serving.personal.RecentPages: readers' /v1/feed answers kept for a while on an injected clock,
forgotten on request, and concurrent requests for one reader's answer sharing one computation."""

import asyncio

from newsflow.serving.personal import RecentPages


def test_answers_are_kept_for_their_seconds_per_reader_and_query_and_forgotten_on_request():
    now = [10.0]
    pages = RecentPages(1.0, clock=lambda: now[0])
    pages.put("u1", ("", 20), b"body-20", '"e20"')
    pages.put("u1", ("en", 5), b"body-5", '"e5"')
    pages.put("u2", ("", 20), b"other", '"o"')
    now[0] = 10.99
    assert pages.get("u1", ("", 20)) == (b"body-20", '"e20"')
    assert pages.get("u1", ("en", 5)) == (b"body-5", '"e5"')
    assert pages.get("u1", ("", 3)) is None  # another limit: not kept
    pages.forget("u1")
    assert pages.get("u1", ("", 20)) is None and pages.get("u1", ("en", 5)) is None
    assert pages.get("u2", ("", 20)) == (b"other", '"o"')
    now[0] = 11.0  # a second after it was kept
    assert pages.get("u2", ("", 20)) is None


def test_zero_seconds_keeps_nothing_and_a_full_cache_starts_over():
    off = RecentPages(0.0)
    off.put("u", ("", 20), b"b", '"e"')
    assert off.get("u", ("", 20)) is None
    small = RecentPages(60.0, max_readers=2)
    for u in ("a", "b", "c"):
        small.put(u, ("", 20), u.encode(), '"e"')
    assert [small.get(u, ("", 20)) for u in ("a", "b", "c")] == [None, None, (b"c", '"e"')]


def test_concurrent_requests_for_one_answer_share_one_make():
    pages = RecentPages(0.0)  # nothing kept: only the sharing of an answer being made
    made = []

    async def run():
        release = asyncio.Event()

        def make_for(user):
            async def make():
                made.append(user)
                await release.wait()
                return user.encode(), f'"{user}"'

            return make

        waiting = [asyncio.ensure_future(pages.get_or_make(u, ("", 20), make_for(u))) for u in ["a"] * 5 + ["b"] * 3]
        await asyncio.sleep(0)
        release.set()
        answers = await asyncio.gather(*waiting)
        again = await pages.get_or_make("a", ("", 20), make_for("a"))  # the first is done: a new make
        return answers, again

    answers, again = asyncio.run(run())
    assert answers == [(b"a", '"a"')] * 5 + [(b"b", '"b"')] * 3
    assert again == (b"a", '"a"')
    assert made == ["a", "b", "a"]
