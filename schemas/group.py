"""NearDuplicateGroup: a near-duplicate group of articles (syndicated copies of one text)."""

from collections.abc import Sequence
from typing import NamedTuple, Optional

import pyarrow as pa

from newsflow.schemas._arrow import UTC_TS


class NearDuplicateGroup(NamedTuple):
    """State of one near-duplicate group as stored in Redis.

    Attributes:
      cluster_id: ``"c"`` + the article id of the founding article (stable).
      representative_id: article id of the highest-authority member (ties: earliest event time,
        then smallest article id).
      representative_title: its title.
      representative_url: its URL.
      representative_domain: its source domain.
      article_count: number of distinct member articles.
      source_domains: distinct member source domains, sorted.
      languages: distinct member languages, sorted.
      earliest_time: earliest member event time (``Article.event_time``), UTC epoch seconds.
      latest_time: latest member event time, UTC epoch seconds.
      merged_into: always ``None`` now: a group merged into another (or renamed by an earlier copy) is
        deleted, ids being a function of the members (``newsflow.storage.groups``); the column stays
        for rows written before.
    """

    cluster_id: str
    representative_id: str
    representative_title: str
    representative_url: str
    representative_domain: str
    article_count: int
    source_domains: Sequence[str]
    languages: Sequence[str]
    earliest_time: float
    latest_time: float
    merged_into: Optional[str] = None

    @property
    def source_count(self) -> int:
        """Number of distinct outlets."""
        return len(self.source_domains)


GROUP_SCHEMA = pa.schema(
    [
        pa.field("cluster_id", pa.string(), nullable=False),
        pa.field("representative_id", pa.string()),
        pa.field("representative_title", pa.string()),
        pa.field("representative_url", pa.string()),
        pa.field("representative_domain", pa.string()),
        pa.field("article_count", pa.int32()),
        pa.field("source_domains", pa.list_(pa.string())),
        pa.field("languages", pa.list_(pa.string())),
        pa.field("earliest_time", UTC_TS),
        pa.field("latest_time", UTC_TS),
        pa.field("merged_into", pa.string()),
    ]
)
