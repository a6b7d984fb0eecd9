"""Reader preferences: follows, blocks, preferred lead outlets and removed inferred interests.

Shared by ``GET/PUT /v1/me/preferences`` (JSON, bearer token) and the web UI's buttons (form posts
with a session cookie). Sources are outlets (:func:`newsflow.core.outlets.outlet`, the registrable domain),
so blocking ``uk.reuters.com`` blocks every ``reuters.com`` host; topics are lower-case labels.

Document shape (both directions; lists sorted, at most :data:`MAX_ENTRIES` values each)::

    {"follow_topics": [str], "follow_sources": [str], "block_topics": [str], "block_sources": [str],
     "prefer_sources": [str], "dismiss_topics": [str], "mute_words": [str]}

* ``follow_*`` / ``block_*``: ranking boosts followed topics and outlets and removes blocked ones from
  every surface (top, topics, trending, sources, breaking, coverage leads, For You);
* ``prefer_sources``: outlets whose report leads a story's full coverage when they covered it;
* ``dismiss_topics``: inferred interests the reader removed: For You drops stories of these topics
  that were placed by inference (interest vector, similar readers, trending), not by a follow;
* ``mute_words``: words and phrases (:func:`newsflow.core.muting.normalize_phrase`: case-folded, any script)
  whose stories and articles are removed wherever blocks remove them (top, topics, trending, sources,
  breaking, For You, coverage reports and timelines), matched on whole words (:class:`MuteMatcher`).

Contradictions are refused by ``PUT`` (follow and block the same thing, prefer a blocked outlet,
dismiss a followed topic); a button press resolves them instead (blocking unfollows, following
un-blocks and un-dismisses, ...), so one press never leaves a conflict.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import urlsplit

from newsflow.core.muting import MAX_MUTED, normalize_phrase
from newsflow.core.outlets import registrable_domain
from newsflow.schemas import UserProfile
from newsflow.storage.ranking import EXTRA_PREFERENCE_FIELDS, PREFERENCE_FIELDS, PROFILE_PREFERENCE_FIELDS

MAX_ENTRIES = MAX_MUTED  # 200 per list
TOPIC_RE = re.compile(r"[a-z0-9][a-z0-9 _&.'-]{0,63}\Z")
_OUTLET_RE = re.compile(r"[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?\Z")
# action -> (kind, field it adds to or removes from, add?, fields the press clears)
_ACTIONS = {
    ("follow", "topic"): ("follow_topics", True, ("block_topics", "dismiss_topics")),
    ("unfollow", "topic"): ("follow_topics", False, ()),
    ("block", "topic"): ("block_topics", True, ("follow_topics",)),
    ("unblock", "topic"): ("block_topics", False, ()),
    ("dismiss", "topic"): ("dismiss_topics", True, ("follow_topics",)),
    ("undismiss", "topic"): ("dismiss_topics", False, ()),
    ("follow", "source"): ("follow_sources", True, ("block_sources",)),
    ("unfollow", "source"): ("follow_sources", False, ()),
    ("block", "source"): ("block_sources", True, ("follow_sources", "prefer_sources")),
    ("unblock", "source"): ("block_sources", False, ()),
    ("prefer", "source"): ("prefer_sources", True, ("block_sources",)),
    ("unprefer", "source"): ("prefer_sources", False, ()),
    ("mute", "word"): ("mute_words", True, ()),
    ("unmute", "word"): ("mute_words", False, ()),
}
ACTIONS = tuple(sorted({a for a, _ in _ACTIONS}))
KINDS = ("source", "topic", "word")
_CONFLICTS = (
    ("follow_topics", "block_topics", "follow and block"),
    ("follow_sources", "block_sources", "follow and block"),
    ("prefer_sources", "block_sources", "prefer and block"),
    ("follow_topics", "dismiss_topics", "follow and dismiss"),
)


def normalize_topic(value) -> str:
    """A topic label in lower case.

    Raises:
      ValueError: not 1-64 chars of ``[a-z0-9 _&.'-]`` (after lower-casing and stripping spaces, tabs and
        line ends; other control characters are refused, not stripped).
    """
    # ASCII before lower-casing: str.lower maps some other letters onto ASCII ("\u212a" KELVIN SIGN -> "k"),
    # which would make another name an alias of a real topic
    topic = str(value).strip(" \t\r\n").lower() if isinstance(value, str) and value.isascii() else ""
    if not TOPIC_RE.match(topic):
        raise ValueError(f"topic must be 1-64 chars of [a-z0-9 _&.'-], got {echo(value)}")
    return topic


def echo(value, limit: int = 80) -> str:
    """``repr`` of a refused value for an error message, cut to ``limit`` characters (a 10,000-character
    path segment is not sent back in full)."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text):,} chars)"


def normalize_source(value) -> str:
    """The outlet of a host or http(s) URL (``uk.reuters.com`` → ``reuters.com``; an internationalized
    name is taken in its IDNA form, ``пример.рф`` → ``xn--e1afmkfd.xn--p1ai``).

    Raises:
      ValueError: not a bare host or an http(s) URL without user info and with a valid port, or the
        host has no registrable domain (``com``, ``co.uk``, ``a..b``, IP literals).
    """
    bad = ValueError(f"source must be a domain name or an http(s) URL, got {value!r}")
    if not isinstance(value, str) or len(value) > 2048:
        raise bad
    text = value.strip()
    try:
        if "://" in text:
            parts = urlsplit(text)
            if parts.scheme.lower() not in ("http", "https") or parts.username is not None:
                raise bad
            parts.port  # noqa: B018 - raises ValueError for a port outside 0..65535
            host = parts.hostname or ""
        elif any(c in text for c in "/:@?#\\ "):
            raise bad
        else:
            host = text
        host = host.rstrip(".").lower().encode("idna").decode("ascii")
    except (ValueError, UnicodeError):
        raise bad from None
    out = registrable_domain(host)
    if not out or not _OUTLET_RE.match(out):
        raise bad
    return out


def reader_preferences(profile: UserProfile, extras: Mapping[str, frozenset] | None = None) -> dict:
    """The preference document of a reader: ``profile``'s follows/blocks and ``extras``
    (:meth:`newsflow.storage.ranking.RankingStore.preference_extras`), as sorted lists."""
    doc = {name: sorted(getattr(profile, name)) for name in PROFILE_PREFERENCE_FIELDS}
    for name in EXTRA_PREFERENCE_FIELDS:
        doc[name] = sorted((extras or {}).get(name, ()))
    return doc


def _normalizer(field: str):
    if field == "mute_words":
        return normalize_phrase
    return normalize_topic if field.endswith("_topics") else normalize_source


def _check_conflicts(prefs: Mapping[str, list]) -> None:
    for a, b, verb in _CONFLICTS:
        both = set(prefs[a]) & set(prefs[b])
        if both:
            what = "topics" if a.endswith("_topics") else "sources"
            raise ValueError(f"cannot both {verb} {what}: {sorted(both)}")


def merge_preferences(current: Mapping[str, list], body) -> dict:
    """Validates a ``PUT`` body and returns the complete new preference document.

    Fields absent from ``body`` keep their current values; a present field replaces the list.

    Args:
      current: the stored document (:func:`reader_preferences`).
      body: the decoded JSON body (must be an object with only :data:`PREFERENCE_FIELDS` keys, each a
        list of strings).

    Raises:
      ValueError: unknown field, wrong type, invalid value, too many values, or a contradiction.
    """
    if not isinstance(body, dict):
        raise ValueError("body must be a JSON object")
    unknown = sorted(set(body) - set(PREFERENCE_FIELDS))
    if unknown:
        raise ValueError(f"unknown fields {unknown}; allowed: {list(PREFERENCE_FIELDS)}")
    prefs = {name: list(current.get(name, ())) for name in PREFERENCE_FIELDS}
    for name, values in body.items():
        if not isinstance(values, list) or len(values) > MAX_ENTRIES:
            raise ValueError(f"{name} must be a list of at most {MAX_ENTRIES} strings")
        prefs[name] = sorted({_normalizer(name)(v) for v in values})
    _check_conflicts(prefs)
    return prefs


def apply_action(current: Mapping[str, list], action: str, kind: str, value: str) -> dict:
    """One button press on a ``topic``, ``source`` or ``word``: ``follow``/``unfollow``, ``block``/``unblock``,
    ``prefer``/``unprefer`` (sources), ``dismiss``/``undismiss`` (topics) or ``mute``/``unmute`` (words and
    phrases); the press also clears
    what would contradict it (blocking unfollows and un-prefers, following un-blocks, ...).

    Args:
      current: the stored document (:func:`reader_preferences`).

    Returns:
      The fields that change, ``{field: sorted list}`` (for :meth:`RankingStore.write_preferences`).

    Raises:
      ValueError: unknown action/kind pair, an invalid value, or more than :data:`MAX_ENTRIES` values.
    """
    spec = _ACTIONS.get((action, kind))
    if spec is None:
        raise ValueError(f"action must be one of {ACTIONS} on a kind in {KINDS}, got {action!r} on {kind!r}")
    field, add, clears = spec
    norm = _normalizer(field)(value)
    changed = {name: set(current.get(name, ())) for name in (field, *clears)}
    if add:
        changed[field].add(norm)
        for name in clears:
            changed[name].discard(norm)
    else:
        changed[field].discard(norm)
    if len(changed[field]) > MAX_ENTRIES:
        raise ValueError(f"at most {MAX_ENTRIES} values in {field}")
    return {name: sorted(v) for name, v in changed.items()}
