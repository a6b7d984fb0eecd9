"""UserProfile: what ranking knows about a reader, as serving reads it and the nightly job writes it.

numpy is imported because :attr:`UserProfile.interest` is a float32 ``numpy.ndarray`` (ranking
takes dot products with story embeddings); it is the only non-stdlib, non-pyarrow import here.
"""

from typing import NamedTuple, Optional

import numpy as np
import pyarrow as pa

from newsflow.schemas._arrow import embedding_field, table_to_records


class UserProfile(NamedTuple):
    """A reader's profile (``nf:user:{user_id}``).

    Attributes:
      user_id: opaque id from a verified token.
      interest: 128-dim interest vector in the story-embedding space (float32 ``numpy.ndarray``),
        or ``None`` before the nightly job ran for this reader.
      clicks: number of clicks the interest vector is built from.
      edition: preferred edition, lower case ("" when unknown).
      follow_topics / follow_sources / block_topics / block_sources: frozensets of lower-case
        topic labels and source domains (stored as sorted lists).
    """

    user_id: str
    interest: Optional[np.ndarray] = None
    clicks: int = 0
    edition: str = ""
    follow_topics: frozenset = frozenset()
    follow_sources: frozenset = frozenset()
    block_topics: frozenset = frozenset()
    block_sources: frozenset = frozenset()


USER_PROFILE_SCHEMA = pa.schema(
    [
        pa.field("user_id", pa.string(), nullable=False),
        embedding_field("interest"),
        pa.field("clicks", pa.int32()),
        pa.field("edition", pa.string()),
        pa.field("follow_topics", pa.list_(pa.string())),
        pa.field("follow_sources", pa.list_(pa.string())),
        pa.field("block_topics", pa.list_(pa.string())),
        pa.field("block_sources", pa.list_(pa.string())),
    ]
)


def user_profiles_from_table(table: pa.Table) -> list:
    """UserProfiles from a table with :data:`USER_PROFILE_SCHEMA` (sets and arrays restored)."""
    return table_to_records(
        table,
        UserProfile,
        {
            "interest": lambda v: np.asarray(v, dtype=np.float32),
            "follow_topics": frozenset,
            "follow_sources": frozenset,
            "block_topics": frozenset,
            "block_sources": frozenset,
        },
    )
