"""newsflow.transforms.coders: one explicit registration gives every schemas record a coder that round-trips."""

from __future__ import annotations

import numpy as np
from apache_beam import coders

from newsflow import schemas
from newsflow.schemas import (
    Article,
    DeadLetter,
    EntityRef,
    Event,
    StoryArticle,
    StoryAssignment,
    TopicScore,
    TrendCount,
    TrendInput,
)
from newsflow.transforms import coders as record_coders
from newsflow.transforms.coders import NON_ROW_RECORDS, ROW_RECORDS, register_coders

T0 = 1_700_000_000.25
AID = "0123456789abcdef0123456789abcdef"


def test_every_record_is_registered_once_and_idempotently():
    register_coders()
    register_coders()
    assert set(ROW_RECORDS) | set(NON_ROW_RECORDS) == set(schemas.RECORD_TYPES)
    assert not set(ROW_RECORDS) & set(NON_ROW_RECORDS)
    for record in ROW_RECORDS:
        coder = coders.registry.get_coder(record)
        assert isinstance(coder, coders.RowCoder) and coder.is_deterministic(), record.__name__
    for record in NON_ROW_RECORDS:
        assert not coders.registry.get_coder(record).is_deterministic(), record.__name__


def test_row_coders_round_trip_real_records():
    register_coders()
    samples = [
        Article(
            AID, "https://e.com/a", "https://e.com/a", "e.com", "E", "Title", "Text", ["A"], "E", None, T0, T0
        )._replace(aliases=["f" * 32]),  # a sequence: comes back as a list
        DeadLetter("extract", "not_an_article", "no text", b"\xff", "https://e.com/a"),
        Event("u1", "click", "s" + AID, T0, T0, 2, None, "top", "1-0"),
        StoryArticle(
            AID,
            T0,
            "Title",
            topics=[TopicScore("world", 0.5)],
            entities=[EntityRef("ORG:un", "UN", "ORG")],
            embedding=[0.25] * 128,
            types=[TopicScore("obituary", 1.0)],  # sequences come back as lists, as topics and entities do
        ),
        StoryAssignment(AID, "s" + AID, True, False, ["s1"], 0.0),
        TrendInput(AID, "s" + AID, ["world"], ["UN"]),
        TrendCount("topic", "world", 3, T0 - 3600, T0, False, 0.0),
    ]
    for value in samples:
        coder = coders.registry.get_coder(type(value))
        encoded = coder.encode(value)
        assert coder.decode(encoded) == value
        assert coder.encode(value) == encoded  # deterministic bytes


def test_array_records_use_the_fallback_coder_faithfully():
    register_coders()
    profile = schemas.UserProfile("u1", np.full(128, 0.5, np.float32), 3, "en", frozenset({"sports"}))
    back = coders.registry.get_coder(schemas.UserProfile).decode(
        coders.registry.get_coder(schemas.UserProfile).encode(profile)
    )
    assert back.user_id == "u1" and back.follow_topics == frozenset({"sports"})
    assert back.interest.dtype == np.float32 and np.array_equal(back.interest, profile.interest)


def test_no_transform_registers_coders_on_import():
    import pathlib

    root = pathlib.Path(record_coders.__file__).parent
    offenders = [
        p.name
        for p in root.glob("*.py")
        if p.name != "coders.py" and ("register_coder" in p.read_text() or "register_row" in p.read_text())
    ]
    assert offenders == []
