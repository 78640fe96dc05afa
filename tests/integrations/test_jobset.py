"""JobSet: one group per JobSet and restart attempt; one per replicated job when started InOrder."""

from gangkeeper import names
from gangkeeper.integrations import jobset
from tests.integrations.pods import owner, pod

UID = "5c1d0f4e-2b7a-4c55-9d7e-7a1c0e2f9b10"


def jobset_pod(attempt=0, uid=UID):
    keys = {names.JOBSET_NAME_LABEL: "trainer", names.JOBSET_UID_LABEL: uid,
            names.JOBSET_RESTART_ATTEMPT_LABEL: str(attempt), names.JOBSET_REPLICATED_JOB_LABEL: "workers",
            names.JOB_NAME_LABEL: "trainer-workers-0"}
    return pod("trainer-workers-0-0-x7k2p", keys, keys, owners=[owner("Job", "trainer-workers-0", "aa11", "batch/v1")])


def test_the_group_is_keyed_by_jobset_uid_and_restart_attempt():
    first, retry = jobset.group_of(jobset_pod(0)), jobset.group_of(jobset_pod(1))
    assert first.identity.name == f"trainer-{UID}-0" and first.identity.source == names.SOURCE_JOBSET
    assert retry.identity.name == f"trainer-{UID}-1"
    assert first.reason == f"JobSet trainer (uid {UID}), restart attempt 0"


def test_no_group_without_name_and_uid():
    assert jobset.group_of(pod(labels={names.JOBSET_NAME_LABEL: "trainer"})) is None


def test_replicated_jobs_add_up_unless_they_start_in_order():
    spec = {"replicatedJobs": [
        {"name": "a", "replicas": 2, "template": {"spec": {"parallelism": 4, "completions": 4}}},
        {"name": "b", "template": {"spec": {"parallelism": 3, "completions": 1}}}]}
    assert jobset.sizes(spec) == ({"": 9}, False)
    in_order = {**spec, "startupPolicy": {"startupPolicyOrder": "InOrder"}}
    assert jobset.sizes(in_order) == ({"a": 8, "b": 1}, True)
    declared = jobset.declaration({"spec": in_order})
    assert (declared["sizes"], declared["in_order"]) == ({"a": 8, "b": 1}, True)


def test_the_jobset_declaring_a_member_is_the_one_its_labels_name_not_its_job():
    labels = {names.JOBSET_NAME_LABEL: "trainer", names.JOBSET_UID_LABEL: UID}
    assert jobset.INTEGRATION.declarer("g", labels, ("trainer-workers-0", "aa11")) == ("trainer", UID)
    assert jobset.INTEGRATION.part_label in jobset.INTEGRATION.kept_labels


def test_a_jobset_is_suspended_through_spec_suspend():
    assert jobset.SUSPENSION.patch({"metadata": {"resourceVersion": "3"}, "spec": {}}, True) == {
        "metadata": {"resourceVersion": "3"}, "spec": {"suspend": True}}
