"""Time for the emulated cluster, injected into every component.

Components never read the wall clock: they are handed a clock and a `now`. A `VirtualClock`
lets a replay of thousands of jobs jump from one due moment to the next in seconds and lets
tests run without sleeping; a `RealClock` drives the same components for a live demo.
"""

import time
from datetime import datetime, timezone
from typing import Protocol

# 2026-01-01T00:00:00Z: a fixed start keeps virtual timestamps reproducible.
VIRTUAL_EPOCH = 1767225600.0


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the Unix epoch."""
        ...


class RealClock:
    def now(self) -> float:
        return time.time()


class VirtualClock:
    """A clock that moves only when told to; it never moves backwards."""

    def __init__(self, start: float = VIRTUAL_EPOCH):
        self._now = start
        self.start = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"cannot advance a clock by {seconds} seconds; give 0 or more")
        self._now += seconds

    def advance_to(self, moment: float) -> None:
        """Jump forward to `moment`; a moment already past leaves the clock where it is."""
        self._now = max(self._now, moment)


def epoch(timestamp: str) -> float:
    """An RFC 3339 timestamp (as the API server writes them) in seconds since the Unix epoch."""
    return datetime.fromisoformat(timestamp).timestamp()


def rfc3339(moment: float) -> str:
    """A timestamp as the API server writes it: UTC, whole seconds."""
    return datetime.fromtimestamp(int(moment), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

