"""Fixtures of the web tests: ``site``, an httpx client of the populated serving app on 127.0.0.1."""

from __future__ import annotations

import pytest

from tests.helpers import populated_site

SECRET = b"w" * 32
"""The token secret of ``site``'s app (sign bearer tokens with it)."""


@pytest.fixture()
def site(server, tmp_path):
    with populated_site(server, str(tmp_path / "snap"), SECRET) as c:
        yield c
