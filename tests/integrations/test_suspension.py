"""Suspending and resuming an owner: the patches, guarded by the resourceVersion read, and idempotent."""

import pytest

from gangkeeper.integrations import job, jobset, pytorchjob
from gangkeeper.integrations.kind import Suspension

SWITCHES = [job.SUSPENSION, jobset.SUSPENSION, pytorchjob.SUSPENSION]


def at(switch: Suspension, value) -> dict:
    """An owner read at resourceVersion 12 with the switch set to `value`."""
    body: dict = {switch.field[-1]: value}
    for key in reversed(switch.field[:-1]):
        body = {key: body}
    return {"metadata": {"name": "w", "resourceVersion": "12"}, **body}


@pytest.mark.parametrize("switch", SWITCHES, ids=["job", "jobset", "pytorchjob"])
def test_suspend_then_resume(switch):
    running, suspended = at(switch, False), at(switch, True)
    assert not switch.is_suspended(running) and switch.is_suspended(suspended)
    assert switch.patch(running, True) == {**at(switch, True), "metadata": {"resourceVersion": "12"}}
    assert switch.patch(suspended, False) == {**at(switch, False), "metadata": {"resourceVersion": "12"}}


@pytest.mark.parametrize("switch", SWITCHES, ids=["job", "jobset", "pytorchjob"])
def test_no_patch_when_the_switch_already_is_so(switch):
    assert switch.patch(at(switch, True), True) is None
    assert switch.patch(at(switch, False), False) is None
    assert switch.patch({"metadata": {"resourceVersion": "1"}}, False) is None  # unset is running


@pytest.mark.parametrize("value", [None, "true", 1, {}])
def test_only_true_suspends(value):
    assert not job.SUSPENSION.is_suspended(at(job.SUSPENSION, value))
    assert not pytorchjob.SUSPENSION.is_suspended({"spec": {"runPolicy": "garbage"}})
