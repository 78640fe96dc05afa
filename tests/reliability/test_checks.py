"""The reliability runs' own pure checks on plain input: leadership terms that overlap (ha) and the
memory-leak verdict (load). The invariants checked on the cluster are `sim.invariants`' (tests/sim)."""

from reliability.ha import acting_overlaps
from reliability.load import leak_verdict


def test_acting_intervals_that_overlap_are_found():
    def line(ts, event):
        return {"ts": f"2026-01-01T00:00:{ts:02d}.000Z", "event": event}
    a = [line(0, "leader.started"), line(1, "gang.released"), line(5, "gang.reserved")]  # killed: no stop
    b_late = [line(20, "leader.started"), line(21, "gang.released")]
    b_early = [line(3, "leader.started"), line(4, "gang.released")]
    assert acting_overlaps({"a": a, "b": b_late}) == []
    assert len(acting_overlaps({"a": a, "b": b_early})) == 1
    assert len(acting_overlaps({"a": a + [line(30, "gang.bound")] , "b": []})) == 0
    assert len(acting_overlaps({"a": [line(1, "leader.started"), line(2, "leader.stopped"),
                                      line(3, "gang.released")]})) == 1  # acted after stepping down


def test_the_leak_verdict_tells_levelling_off_from_steady_growth():
    levelling = [(t, 100 + min(t, 300) / 10) for t in range(0, 600, 5)]
    growing = [(t, 100 + t / 10) for t in range(0, 600, 5)]  # 6 MiB/min throughout
    assert leak_verdict(levelling)["levels_off"]
    assert not leak_verdict(growing)["levels_off"]
