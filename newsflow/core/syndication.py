"""Syndication: which members of a near-duplicate group are another outlet republishing the text.

A near-duplicate group (SimHash, :mod:`newsflow.core.simhash`) holds every copy of one text. Its lead
report is one member; the others are either **syndicated copies** (another outlet republishing
the text: a wire story on a local paper's site) or **own duplicates** (the same outlet serving its
own article twice: a second URL, a mobile or AMP page, a re-post). Only the first kind is
syndication. "Same outlet" is :func:`newsflow.core.outlets.outlet` (registrable domain), the one
definition every tier uses, so ``www.king5.com`` and ``king5.com`` are one outlet.

Used by the coverage view (a story's reports and their syndicated copies) and by whoever counts
copies per outlet; :func:`newsflow.core.authority.originality_counts` already ignores one-outlet groups.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple, TypeVar

from newsflow.core.outlets import outlet

T = TypeVar("T")


class SplitCopies(NamedTuple):
    """The non-lead members of a near-duplicate group, split by outlet (input order kept).

    Attributes:
      syndicated: members from an outlet other than the lead's (and with a readable outlet).
      own_duplicates: members from the lead's own outlet.
    """

    syndicated: list
    own_duplicates: list


def is_syndicated_copy(copy_domain: str, lead_domain: str) -> bool:
    """True when a copy at ``copy_domain`` is another outlet republishing the lead's text.

    Args:
      copy_domain: host or URL of the copy (``"www.king5.com"``, ``"https://kare11.com/x"``).
      lead_domain: host or URL of the lead report.

    Returns:
      False for the same outlet (``king5.com`` vs ``www.king5.com``) or when either outlet is
      unreadable (no evidence of republishing); True otherwise.
    """
    a, b = outlet(copy_domain), outlet(lead_domain)
    return bool(a and b and a != b)


def split_copies(
    lead_domain: str, copies: Iterable[T], domain_of: Callable[[T], str] = lambda a: a.source_domain
) -> SplitCopies:
    """Splits a group's non-lead members into syndicated copies and the lead outlet's own duplicates.

    Args:
      lead_domain: host (or URL) of the group's lead report.
      copies: the other members (any objects; e.g. ``schemas.ArticleRecord``).
      domain_of: reads a member's host or URL (default: its ``source_domain``).

    Returns:
      :class:`SplitCopies`; a member whose outlet cannot be read counts as an own duplicate.
    """
    syndicated, own = [], []
    for c in copies:
        (syndicated if is_syndicated_copy(domain_of(c), lead_domain) else own).append(c)
    return SplitCopies(syndicated, own)
