"""Outlets are registrable domains from the bundled Public Suffix List snapshot."""

import pytest

from newsflow.core.outlets import outlet


@pytest.mark.parametrize(
    "given, expected",
    [
        ("https://uk.reuters.com/world/x", "reuters.com"),
        ("in.reuters.com", "reuters.com"),
        ("www.bbc.co.uk", "bbc.co.uk"),
        ("https://WWW.Herald.Example.org:8443/p", "example.org"),
        ("news.example.co.jp", "example.co.jp"),
        ("alice.github.io", "alice.github.io"),  # private suffix: each blog is its own outlet
        ("http://127.0.0.1:8080/feed.xml", "127.0.0.1"),
        ("http://[::1]:8080/", "::1"),
        ("localhost", "localhost"),
        ("", ""),
        ("http://[::1/", ""),
    ],
)
def test_outlet(given, expected):
    assert outlet(given) == expected
