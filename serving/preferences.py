"""Reader preferences: follows and blocks of topics and outlets, validated and normalized.

Shared by ``GET/PUT /v1/me/preferences`` (JSON, bearer token) and the web UI's follow/block buttons
(form posts with a session cookie). Sources are outlets (:func:`newsflow.outlets.outlet`, the
registrable domain), so blocking ``uk.reuters.com`` blocks every ``reuters.com`` host; topics are
lower-case labels. Following and blocking the same thing is refused rather than guessed.

Document shape (both directions)::

    {"follow_topics": [str], "follow_sources": [str], "block_topics": [str], "block_sources": [str]}

Lists are sorted and hold at most :data:`MAX_ENTRIES` values each.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from newsflow.outlets import outlet
from newsflow.ranking.store import PREFERENCE_FIELDS
from schemas import UserProfile

MAX_ENTRIES = 200
TOPIC_RE = re.compile(r"[a-z0-9][a-z0-9 _&.'-]{0,63}\Z")
_OUTLET_RE = re.compile(r"[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?\Z")
ACTIONS = ("follow", "unfollow", "block", "unblock")
KINDS = ("topic", "source")


def normalize_topic(value) -> str:
    """A topic label in lower case.

    Raises:
      ValueError: not 1-64 chars of ``[a-z0-9 _&.'-]`` (after lower-casing and stripping).
    """
    topic = str(value).strip().lower() if isinstance(value, str) else ""
    if not TOPIC_RE.match(topic):
        raise ValueError(f"topic must be 1-64 chars of [a-z0-9 _&.'-], got {value!r}")
    return topic


def normalize_source(value) -> str:
    """The outlet of a host or URL (``uk.reuters.com`` → ``reuters.com``).

    Raises:
      ValueError: no host can be read, or it is not a plain domain name.
    """
    out = outlet(value) if isinstance(value, str) and len(value) <= 2048 else ""
    if not out or not _OUTLET_RE.match(out):
        raise ValueError(f"source must be a domain name or URL, got {value!r}")
    return out


def profile_preferences(profile: UserProfile) -> dict:
    """The preference document of ``profile`` (sorted lists)."""
    return {name: sorted(getattr(profile, name)) for name in PREFERENCE_FIELDS}


def _check_conflicts(prefs: Mapping[str, list]) -> None:
    for kind in ("topics", "sources"):
        both = set(prefs[f"follow_{kind}"]) & set(prefs[f"block_{kind}"])
        if both:
            raise ValueError(f"cannot both follow and block {kind}: {sorted(both)}")


def merge_preferences(current: UserProfile, body) -> dict:
    """Validates a ``PUT`` body and returns the complete new preference document.

    Fields absent from ``body`` keep their current values; a present field replaces the list.

    Args:
      current: the reader's stored profile.
      body: the decoded JSON body (must be an object with only :data:`PREFERENCE_FIELDS` keys,
        each a list of strings).

    Raises:
      ValueError: unknown field, wrong type, invalid value, too many values, or a follow/block conflict.
    """
    if not isinstance(body, dict):
        raise ValueError("body must be a JSON object")
    unknown = sorted(set(body) - set(PREFERENCE_FIELDS))
    if unknown:
        raise ValueError(f"unknown fields {unknown}; allowed: {list(PREFERENCE_FIELDS)}")
    prefs = profile_preferences(current)
    for name, values in body.items():
        if not isinstance(values, list) or len(values) > MAX_ENTRIES:
            raise ValueError(f"{name} must be a list of at most {MAX_ENTRIES} strings")
        norm = normalize_topic if name.endswith("_topics") else normalize_source
        prefs[name] = sorted({norm(v) for v in values})
    _check_conflicts(prefs)
    return prefs


def apply_action(current: UserProfile, action: str, kind: str, value: str) -> dict:
    """One button press: ``follow``/``unfollow``/``block``/``unblock`` a ``topic``/``source``.

    Following something removes a block of it and blocking removes a follow, so one press never
    leaves a conflict.

    Returns:
      The fields that change, ``{field: sorted list}`` (for :meth:`RankingStore.write_preferences`).

    Raises:
      ValueError: unknown action or kind, or an invalid value.
    """
    if action not in ACTIONS or kind not in KINDS:
        raise ValueError(f"action must be one of {ACTIONS} and kind one of {KINDS}, got {action!r}/{kind!r}")
    norm = normalize_topic(value) if kind == "topic" else normalize_source(value)
    prefs = profile_preferences(current)
    follow, block = f"follow_{kind}s", f"block_{kind}s"
    sets = {follow: set(prefs[follow]), block: set(prefs[block])}
    if action == "follow":
        sets[follow].add(norm)
        sets[block].discard(norm)
    elif action == "unfollow":
        sets[follow].discard(norm)
    elif action == "block":
        sets[block].add(norm)
        sets[follow].discard(norm)
    else:
        sets[block].discard(norm)
    if len(sets[follow]) > MAX_ENTRIES or len(sets[block]) > MAX_ENTRIES:
        raise ValueError(f"at most {MAX_ENTRIES} {kind}s may be followed or blocked")
    return {name: sorted(v) for name, v in sets.items()}
