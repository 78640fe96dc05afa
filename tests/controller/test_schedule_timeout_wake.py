"""A schedule timeout is acted on when it expires, not at the next resync (issue 14)."""

import pytest

from gangkeeper.controller.deciding.decisions import Report
from gangkeeper.controller.deciding.settings import Settings
from tests.controller.world import NOW, Run, World, add_group, nodes


def _timed_out(outcome) -> list[Report]:
    return [a for a in outcome.actions if isinstance(a, Report) and a.event == "gang.timed_out"]


@pytest.mark.parametrize("fail", [False, True], ids=["keeps-waiting", "fails"])
def test_the_pass_says_when_a_schedule_timeout_falls_due(fail):
    world = World(nodes(1))
    add_group(world, "g", 2, timeout=20)  # 2 × 8 GPUs on one 8-GPU node: waits
    run = Run(world, Settings(fail_on_schedule_timeout=fail))
    first = run.step(seconds=0)
    assert _timed_out(first) == []
    assert first.next_due == pytest.approx(NOW + 20), "wakes after 20 s, not at the 30 s resync"
    run.now = first.next_due
    (report,) = _timed_out(run.step())
    assert "within 20s" in report.message


def test_a_group_without_a_schedule_timeout_sets_no_wake_up():
    world = World(nodes(1))
    add_group(world, "g", 2)
    assert Run(world).step().next_due is None
