"""Transform tests build pipelines from transforms directly, without ``build_pipeline``, so they
register the records' coders themselves, as every pipeline builder must (``newsflow.transforms.coders``)."""

from __future__ import annotations

import pytest

from newsflow.transforms.coders import register_coders


@pytest.fixture(autouse=True, scope="session")
def _record_coders():
    """The ``schemas`` records' coders, registered once (idempotent) before any pipeline is built."""
    register_coders()
