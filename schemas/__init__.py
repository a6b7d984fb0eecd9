"""Typed records that cross tier boundaries, each with its Arrow schema.

Records are ``typing.NamedTuple`` so Beam encodes them with a deterministic
``RowCoder``. Times are UTC epoch seconds (``float``) in the records and
``timestamp[us, tz=UTC]`` in Arrow. Only stdlib and pyarrow are imported here.
"""

from schemas.raw import RAW_DOCUMENT_SCHEMA, RawDocument, RecordError
from schemas.article import ARTICLE_SCHEMA, Article
from schemas.cluster import CLUSTER_SCHEMA, Cluster
from schemas.deadletter import DEAD_LETTER_SCHEMA, DeadLetter

__all__ = [
    "ARTICLE_SCHEMA",
    "Article",
    "CLUSTER_SCHEMA",
    "Cluster",
    "DEAD_LETTER_SCHEMA",
    "DeadLetter",
    "RAW_DOCUMENT_SCHEMA",
    "RawDocument",
    "RecordError",
]
