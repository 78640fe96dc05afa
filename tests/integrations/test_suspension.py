"""Suspending and resuming an owner: the patches, guarded by the resourceVersion read, and idempotent;
gangkeeper's mark on an owner it suspended, and when it says to resume it."""

import pytest

from gangkeeper import names
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


def marked(switch: Suspension, value, annotations: dict) -> dict:
    owner = at(switch, value)
    owner["metadata"]["annotations"] = annotations
    return owner


@pytest.mark.parametrize("switch", SWITCHES, ids=["job", "jobset", "pytorchjob"])
def test_gangkeeper_suspends_with_its_mark_and_resumes_removing_it(switch):
    suspending = switch.suspending("12", "2027-01-15T08:00:30Z")
    mark = {names.SUSPENDED_BY_ANNOTATION: "gangkeeper", names.RESUME_AT_ANNOTATION: "2027-01-15T08:00:30Z"}
    assert suspending == {**at(switch, True), "metadata": {"resourceVersion": "12", "annotations": mark}}
    state = switch.state(marked(switch, True, mark))
    assert (state.resource_version, state.held, state.resume_at) == ("12", True, 1_800_000_030.0)
    assert switch.resuming("13") == {**at(switch, False), "metadata": {"resourceVersion": "13", "annotations": {
        names.SUSPENDED_BY_ANNOTATION: None, names.RESUME_AT_ANNOTATION: None}}}


@pytest.mark.parametrize(("value", "annotations"), [
    (True, {}),  # a user's suspension
    (False, {names.SUSPENDED_BY_ANNOTATION: "gangkeeper"}),  # resumed by a user, our mark left on it
    (True, {names.SUSPENDED_BY_ANNOTATION: "someone"}),
])
def test_only_an_owner_suspended_under_gangkeepers_mark_is_held(value, annotations):
    assert not job.SUSPENSION.state(marked(job.SUSPENSION, value, annotations)).held


@pytest.mark.parametrize("written", ["", "tomorrow", "2027-01-15T08:00:30"])  # the last one has no zone
def test_a_resume_time_that_cannot_be_read_is_none(written):
    mark = {names.SUSPENDED_BY_ANNOTATION: "gangkeeper", names.RESUME_AT_ANNOTATION: written}
    assert job.SUSPENSION.state(marked(job.SUSPENSION, True, mark)).resume_at is None
