"""newsflow.core.timeutil: every parser and formatter against hand-computed UTC epoch seconds.

2024-05-02T00:00:00Z is 19,845 days after 1970-01-01 (19,723 days to 2024-01-01, then
31 + 29 + 31 + 30 + 1 days): 19,845 x 86,400 = 1,714,608,000 s; 06:00 adds 21,600 s.
"""

import time

import pytest

from newsflow.core.timeutil import (
    MissingOffsetError,
    epoch_or_iso_to_epoch,
    format_epoch,
    http_date_to_epoch,
    iso_datetime,
    iso_to_epoch,
    iso_to_epoch_or_none,
    page_date_to_epoch,
    rfc3339_to_epoch,
    struct_time_to_epoch,
    utc_date,
)

MIDNIGHT = 1714608000.0  # 2024-05-02T00:00:00Z
SIX = 1714629600.0  # 2024-05-02T06:00:00Z


def test_iso_to_epoch():
    assert iso_to_epoch("2024-05-02T06:00:00Z") == SIX
    assert iso_to_epoch("2024-05-02T08:00:00+02:00") == SIX
    assert iso_to_epoch("2024-05-02T01:30:00-04:30") == SIX
    assert iso_to_epoch("2024-05-02T06:00:00") == SIX  # naive means UTC
    assert iso_to_epoch("2024-05-02") == MIDNIGHT
    assert iso_to_epoch("2024-05-02T06:00:00.250Z") == SIX + 0.25
    assert iso_to_epoch("1970-01-01T00:00:00Z") == 0.0
    with pytest.raises(ValueError):
        iso_to_epoch("02/05/2024")
    with pytest.raises(ValueError):
        iso_to_epoch(" 2024-05-02")  # not stripped


def test_replace_z_only_differs_on_malformed_text():
    assert iso_to_epoch("2024-05-02T06:00:00Z", replace_z=False) == SIX
    assert iso_to_epoch("2024-05-02Z") == MIDNIGHT  # "2024-05-02+00:00" reads as a naive date
    with pytest.raises(ValueError):
        iso_to_epoch("2024-05-02Z", replace_z=False)
    assert iso_datetime("2024-05-02T06:00:00").tzinfo is None
    assert iso_datetime("2024-05-02T06:00:00Z").utcoffset().total_seconds() == 0


def test_iso_to_epoch_or_none():
    assert iso_to_epoch_or_none(" 2024-05-02T06:00:00Z\n") == SIX
    assert iso_to_epoch_or_none("2024-05-02") == MIDNIGHT
    for bad in ("", "   ", None, "yesterday", "2024-5-2", "2024-13-01"):
        assert iso_to_epoch_or_none(bad) is None


def test_page_date_to_epoch():
    assert page_date_to_epoch("2024-05-02T06:00:00Z") == (SIX, True)
    assert page_date_to_epoch("2024-05-02T06:00:00+0000") == (SIX, True)
    assert page_date_to_epoch(" 2024-05-02T06:00:00 ") == (SIX, True)  # naive, but a time of day
    assert page_date_to_epoch("2024-05-02") == (MIDNIGHT, False)
    assert page_date_to_epoch("2024-05-02T00:00:00") == (MIDNIGHT, False)  # htmldate's "day only"
    assert page_date_to_epoch("2024-05-02T00:00:00Z") == (MIDNIGHT, True)  # an offset means a real time
    assert page_date_to_epoch("2024-5-2") == (MIDNIGHT, False)  # strptime fallback takes unpadded fields
    for bad in ("", "May 2nd", "2024-13-01"):
        assert page_date_to_epoch(bad) == (None, False)


def test_epoch_or_iso_to_epoch():
    assert epoch_or_iso_to_epoch("1714629600") == SIX
    assert epoch_or_iso_to_epoch(" 1714629600.5 ") == SIX + 0.5
    assert epoch_or_iso_to_epoch("2024-05-02T06:00:00Z") == SIX
    assert epoch_or_iso_to_epoch("2024-05-02T06:00") == SIX
    for bad in ("latest", " 2024-05-02", "2024-05-02Z", ""):
        with pytest.raises(ValueError):
            epoch_or_iso_to_epoch(bad)


def test_rfc3339_to_epoch():
    assert rfc3339_to_epoch(" 2024-05-02T06:00:00Z ") == SIX
    assert rfc3339_to_epoch("2024-05-02T11:30:00+05:30") == SIX
    with pytest.raises(MissingOffsetError):
        rfc3339_to_epoch("2024-05-02T06:00:00")
    with pytest.raises(MissingOffsetError):
        rfc3339_to_epoch("2024-05-02")
    with pytest.raises(ValueError) as e:
        rfc3339_to_epoch("not a time")
    assert not isinstance(e.value, MissingOffsetError)
    assert issubclass(MissingOffsetError, ValueError)


def test_http_date_to_epoch():
    assert http_date_to_epoch("Thu, 02 May 2024 06:00:00 GMT") == SIX
    assert http_date_to_epoch("Thu, 02 May 2024 08:00:00 +0200") == SIX
    for bad in ("", "soon", "120"):
        assert http_date_to_epoch(bad) is None


def test_struct_time_to_epoch():
    assert struct_time_to_epoch(time.struct_time((2024, 5, 2, 6, 0, 0, 3, 123, 0))) == SIX
    assert struct_time_to_epoch((2024, 5, 2, 0, 0, 0)) == MIDNIGHT
    assert isinstance(struct_time_to_epoch((1970, 1, 1, 0, 0, 0)), float)


def test_format_epoch():
    assert format_epoch(None) == ""
    assert format_epoch(1714629600) == "1714629600.0"
    assert format_epoch(0.1) == "0.1"
    for t in (SIX + 0.1, 1e-7, 1714629600.123456789):
        assert float(format_epoch(t)) == t


def test_utc_date():
    assert utc_date(SIX) == "2024-05-02"
    assert utc_date(MIDNIGHT) == "2024-05-02"
    assert utc_date(MIDNIGHT - 1) == "2024-05-01"
    assert utc_date(0) == "1970-01-01"
