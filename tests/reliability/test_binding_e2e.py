"""Issue 15's complete → bound benchmark in its quick form (`gangkeeper bench binding --quick`), with the
real webhook and controller processes on the live cluster emulation. No timed assertion: what is
asserted is that every group of both sides was bound and that the result carries every figure."""

import pytest

from reliability import binding

pytestmark = pytest.mark.e2e


def test_every_group_of_both_sides_is_bound_and_measured(tmp_path):
    spec = binding.Binding(sizes=(4, 16), groups=3, pause=0.1)
    result = binding.run(tmp_path, spec)
    assert sorted((g.size, g.side) for g in result.warmups) == sorted(
        (size, side) for size in spec.sizes for side in binding.SIDES), "one warm-up pair per size"
    for size in spec.sizes:
        for side in binding.SIDES:
            groups = [g for g in result.groups if g.size == size and g.side == side]
            assert len(groups) == spec.groups
            assert all(g.bound == size and g.bound_ms is not None and g.bound_ms >= 0 for g in groups), groups
            assert all(g.gated == (size if side == binding.GANGKEEPER else 0) for g in groups), "the webhook's choice"
        ours = [g for g in result.groups if g.size == size and g.side == binding.GANGKEEPER]
        assert all(None not in (g.first_reserved_ms, g.reserved_ms, g.released_ms) for g in ours), ours
        assert all(g.controller_ms is not None and g.controller_ms > 0 for g in ours), "the controller observed each"
        bare = [g for g in result.groups if g.size == size and g.side == binding.BARE]
        assert all((g.first_reserved_ms, g.reserved_ms, g.released_ms) == (None,) * 3 for g in bare), "left alone"
    summary = binding.summary(result)
    assert set(summary["sizes"]) == set(spec.sizes)
    row = summary["sizes"][16]
    assert row[binding.GANGKEEPER]["all_bound"] == row[binding.BARE]["all_bound"] == spec.groups
    assert set(row["difference_ms"]) == {"p50", "p99"} and row["goal_ms"] == binding.GOAL_MS[16]
    assert row[binding.GANGKEEPER]["controller_metric"]["count"] == spec.groups
