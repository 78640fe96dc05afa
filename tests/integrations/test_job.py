"""batch/v1 Job: grouped by the Job that controls the pod, sized min(parallelism, completions)."""

import pytest

from gangkeeper import names
from gangkeeper.integrations import job
from tests.integrations.pods import owner, pod

UID = "1b2c"


def job_pod(name="sweep", uid=UID, **kw):
    labels = {names.JOB_NAME_LABEL: name, names.JOB_CONTROLLER_UID_LABEL: uid, names.JOB_COMPLETION_INDEX: "3"}
    return pod(f"{name}-3-abcde", labels, owners=[owner("Job", name, uid, "batch/v1")], **kw)


def test_a_job_pod_is_grouped_by_its_job_name_and_uid():
    found = job.group_of(job_pod())
    assert (found.identity.name, found.identity.source) == (f"sweep-{UID}", names.SOURCE_JOB)
    assert found.reason == f"Job sweep (uid {UID})"


@pytest.mark.parametrize("body", [
    pod("bare", {names.JOB_NAME_LABEL: "sweep"}),  # no owner
    pod("cron", {names.JOB_NAME_LABEL: "sweep"}, owners=[owner("Job", "sweep", UID, controller=False)]),
    pod("no-uid", {names.JOB_NAME_LABEL: "sweep"}, owners=[owner("Job", "sweep", "")]),
    pod("unlabelled", owners=[owner("Job", "sweep", UID)]),
])
def test_no_group_without_the_label_and_a_controlling_job_with_a_uid(body):
    assert job.group_of(body) is None


@pytest.mark.parametrize(("spec", "size"), [
    ({}, 1), ({"parallelism": 8}, 8), ({"parallelism": 8, "completions": 4}, 4), ({"parallelism": 2, "completions": 9}, 2),
])
def test_the_size_is_what_the_job_runs_at_once(spec, size):
    assert job.size(spec) == size
    assert job.declaration({"spec": spec})["sizes"] == {"": size}


def test_the_job_declaring_a_member_is_its_owner():
    assert job.INTEGRATION.declarer("g", {}, ("sweep", UID)) == ("sweep", UID)
    assert job.INTEGRATION.declarer("g", {}, None) is None


def test_a_job_is_suspended_through_spec_suspend():
    running = {"metadata": {"name": "sweep", "resourceVersion": "41"}, "spec": {"parallelism": 4}}
    assert job.SUSPENSION.patch(running, True) == {"metadata": {"resourceVersion": "41"}, "spec": {"suspend": True}}
    assert job.SUSPENSION.is_suspended({"spec": {"suspend": True}})
