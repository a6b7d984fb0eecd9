"""What one signed-in reader may see of a list of stories or a story's coverage (:class:`ReaderView`).

Every surface (the JSON API and the web pages: top, topics, trending, sources, breaking, For You, Saved,
full coverage) applies the same rules through this one type, so a preference set in one place holds in
every other:

* blocked outlets and topics (:func:`newsflow.core.ranking.rerank.is_blocked`) and muted words
  (:class:`newsflow.core.muting.MuteMatcher` over title, description and entities) remove a story;
* on a coverage page they remove the articles of blocked outlets and muted headlines from the reports,
  the sources and the timeline, and the lead follows ``prefer_sources``;
* read stories (the read-state store, :mod:`newsflow.storage.reader_state`) carry ``"read": true`` (cards
  dimmed) and ``?hide_read=1`` removes them;
* For You (:meth:`ReaderView.for_you_keep`) never shows a read story again unless it changed since the read
  (more independent reports than then): it then carries ``"new_since_read": <new reports>`` and the page says
  "New developments since you read it"; stories of removed interests (``dismiss_topics``) are dropped
  when they were placed by inference, not by a follow or breaking news.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from newsflow.core.muting import MuteMatcher
from newsflow.core.outlets import outlet
from newsflow.core.ranking.rerank import is_blocked
from newsflow.schemas import UserProfile
from newsflow.storage.reader_state import ReadMark, changed_since_read

NEW_DEVELOPMENTS = "New developments since you read it"
"""The For You label of a read story shown again because it changed."""


def hide_read_param(query_params: Mapping) -> bool:
    """``?hide_read=`` as a flag: ``1``/``true``/``yes``/``on`` hide read stories; anything else shows them."""
    return str(query_params.get("hide_read", "")).lower() in ("1", "true", "yes", "on")


class ReaderView(NamedTuple):
    """A reader's rules for what they see (module docstring).

    Attributes:
      profile: follows and blocks.
      prefer: outlets whose report leads a coverage page.
      dismiss: removed inferred interests (lower-case topics).
      mutes: muted words and phrases.
      reads: ``{story id: ReadMark}``.
      saved: saved story ids.
      hide_read: drop read stories from lists.
    """

    profile: UserProfile
    prefer: frozenset = frozenset()
    dismiss: frozenset = frozenset()
    mutes: MuteMatcher = MuteMatcher()
    reads: Mapping[str, ReadMark] = {}
    saved: frozenset = frozenset()
    hide_read: bool = False

    @classmethod
    def of(cls, profile: UserProfile, extras: Mapping, reads=None, saved=frozenset(), hide_read=False) -> ReaderView:
        """From a profile and :meth:`newsflow.storage.ranking.RankingStore.preference_extras`."""
        return cls(
            profile,
            frozenset(extras.get("prefer_sources", ())),
            frozenset(extras.get("dismiss_topics", ())),
            MuteMatcher(extras.get("mute_words", ())),
            reads or {},
            frozenset(saved),
            hide_read,
        )

    @property
    def personal(self) -> bool:
        """Whether a page differs from the public one for this reader: anything blocked, muted, read or saved, or
        a preferred lead outlet (coverage pages)."""
        p = self.profile
        return bool(p.block_sources or p.block_topics or self.mutes or self.reads or self.saved or self.prefer)

    def hides(self, item: Mapping) -> bool:
        """Whether a story (feed item) is removed from every list: blocked, muted, or read with ``hide_read``."""
        if is_blocked(item, self.profile) or self.mutes.mutes(item):
            return True
        return self.hide_read and item.get("story_id") in self.reads

    def marked(self, item: Mapping) -> dict:
        """The item with ``read: true`` when read and ``saved: true`` when saved (other items unchanged)."""
        sid = item.get("story_id")
        extra = {}
        if sid in self.reads:
            extra["read"] = True
        if sid in self.saved:
            extra["saved"] = True
        return dict(item, **extra) if extra else dict(item)

    def stories(self, items: Iterable[Mapping]) -> list[dict]:
        """The items the reader sees, in order, marked (:meth:`hides`, :meth:`marked`)."""
        return [self.marked(it) for it in items if not self.hides(it)]

    def topics(self, rows: Iterable[Mapping]) -> list[dict]:
        """Trending topic rows ``{"topic", ...}`` without blocked or muted topics."""
        return [
            r
            for r in rows
            if str(r.get("topic", "")).lower() not in self.profile.block_topics
            and not self.mutes.search(str(r.get("topic", "")))
        ]

    def entities(self, rows: Iterable[Mapping]) -> list[dict]:
        """Trending entity rows ``{"entity", ...}`` without muted ones."""
        return [r for r in rows if not self.mutes.search(str(r.get("entity", "")))]

    def articles(self, articles: Iterable) -> list:
        """A story's member articles (:class:`ArticleRecord`) as the reader's coverage lists, sources and
        timeline are built from: without the articles of blocked outlets, without every copy of a report a
        blocked outlet wrote (a near-duplicate group whose lead, as :func:`newsflow.serving.pages.coverage_page`
        picks it, is from a blocked outlet: republished text is still that outlet's), and without muted
        headlines."""
        articles = list(articles)
        blocked = self.profile.block_sources
        dropped_groups = set()
        if blocked:
            groups: dict = {}
            for a in articles:
                groups.setdefault(a.cluster_id, []).append(a)
            for cid, members in groups.items():
                head = min(
                    members,
                    key=lambda a: (bool(getattr(a, "paywalled", False)), -a.authority, a.event_time, a.article_id),
                )
                if outlet(head.source_domain) in blocked:
                    dropped_groups.add(cid)
        return [
            a
            for a in articles
            if a.cluster_id not in dropped_groups
            and outlet(a.source_domain) not in blocked
            and not self.mutes.search(a.title, getattr(a, "description", ""))
        ]

    def for_you_keep(self, item: Mapping) -> tuple[bool, int]:
        """``(keep, new reports since read)`` of a For You item: a read story is kept only when it changed, a
        story of a removed interest only when a follow or breaking news placed it (blocks and mutes are applied
        by the caller or :meth:`hides`)."""
        if self.mutes.mutes(item):
            return False, 0
        sid = item.get("story_id")
        if self.dismiss and not self._placed_by_follow(item):
            if any(str(t).lower() in self.dismiss for t in item.get("topics") or ()):
                return False, 0
        mark = self.reads.get(sid)
        if mark is None:
            return True, 0
        new = changed_since_read(mark, item.get("independent_count"))
        return (new > 0 and not self.hide_read), new

    def _placed_by_follow(self, item: Mapping) -> bool:
        p = self.profile
        if item.get("breaking") or outlet(str(item.get("domain", ""))) in p.follow_sources:
            return True
        return any(str(t).lower() in p.follow_topics for t in item.get("topics") or ())
