"""The audit line's timestamp, written on every admission: formatted once a second, the same text
as `datetime.isoformat` gives."""

import re
import time
from datetime import datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from gangkeeper.audit import timestamp

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
# 1970 to 9999: what datetime can spell.
NANOSECONDS = st.integers(min_value=0, max_value=253_402_300_799 * 10**9 + 999_999_999)


def spelled_by_datetime(now_ns: int) -> str:
    """The spelling the audit log has always had: datetime.now(timezone.utc) (which keeps whole
    microseconds, rounded down) with milliseconds, and `Z`."""
    now = EPOCH + timedelta(microseconds=now_ns // 1000)
    return now.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@given(st.lists(NANOSECONDS, min_size=1, max_size=5))
def test_the_timestamp_is_the_one_datetime_spells(instants):
    """Any instants in any order: the second formatted last is no answer for another second."""
    assert [timestamp(now_ns) for now_ns in instants] == [spelled_by_datetime(now_ns) for now_ns in instants]


@given(st.integers(min_value=0, max_value=999))
def test_milliseconds_within_one_second_share_its_date_and_time(millisecond):
    second = 1_764_626_594 * 10**9
    assert timestamp(second) == "2025-12-01T22:03:14.000Z"
    assert timestamp(second + millisecond * 10**6 + 999_999) == f"2025-12-01T22:03:14.{millisecond:03d}Z"


def test_by_default_it_is_now():
    before = time.time_ns()
    stamp = timestamp()
    after = time.time_ns()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stamp)
    assert spelled_by_datetime(before) <= stamp <= spelled_by_datetime(after)
