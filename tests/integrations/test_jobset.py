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


def replicated(name, replicas=1, parallelism=1, depends_on=(), labels=None):
    """A replicated job of `replicas` Jobs running `parallelism` pods each, created once `depends_on`
    ((name, status) pairs) are reached; `labels` on its Job template, as Trainer runtimes set them."""
    template = {"metadata": {"labels": labels or {}}, "spec": {"parallelism": parallelism, "completions": parallelism}}
    job = {"name": name, "replicas": replicas, "template": template}
    if depends_on:
        job["dependsOn"] = [{"name": needed, "status": status} for needed, status in depends_on]
    return job


def test_replicated_jobs_add_up_unless_they_start_in_order():
    spec = {"replicatedJobs": [
        {"name": "a", "replicas": 2, "template": {"spec": {"parallelism": 4, "completions": 4}}},
        {"name": "b", "template": {"spec": {"parallelism": 3, "completions": 1}}}]}
    assert jobset.sizes(spec) == ({"": 9}, {})
    in_order = {**spec, "startupPolicy": {"startupPolicyOrder": "InOrder"}}
    assert jobset.sizes(in_order) == ({"a": 8, "b": 1}, {"a": "a", "b": "b"})
    declared = jobset.declaration({"spec": in_order})
    assert (declared["sizes"], declared["parts"]) == ({"a": 8, "b": 1}, {"a": "a", "b": "b"})


def test_a_replicated_job_that_waits_for_another_is_a_group_of_its_own():
    spec = {"replicatedJobs": [replicated("initializer"),
                               replicated("launcher", depends_on=[("initializer", "Complete")]),
                               replicated("worker", parallelism=4, depends_on=[("launcher", "Ready")])]}
    assert jobset.sizes(spec) == ({"initializer": 1, "launcher": 1, "worker": 4},
                                  {"initializer": "initializer", "launcher": "launcher", "worker": "worker"})


def test_replicated_jobs_waiting_for_the_same_stages_start_together():
    spec = {"replicatedJobs": [replicated("driver"), replicated("workers", replicas=2, parallelism=4),
                               replicated("evaluator", depends_on=[("driver", "Ready"), ("workers", "Ready")]),
                               replicated("reporter", depends_on=[("workers", "Ready"), ("driver", "Ready")])]}
    by_part, parts = jobset.sizes(spec)
    assert parts == {"driver": "driver", "workers": "driver", "evaluator": "evaluator", "reporter": "evaluator"}
    assert by_part == {"driver": 9, "evaluator": 2}


def test_a_trainjobs_initializers_count_in_no_stage():
    """Trainer v2's torchtune runtimes: two CPU initializers that must complete before `node` is created."""
    step = names.TRAINER_ANCESTOR_STEP_LABEL
    spec = {"replicatedJobs": [
        replicated("dataset-initializer", labels={step: "dataset-initializer"}),
        replicated("model-initializer", labels={step: "model-initializer"}),
        replicated("node", parallelism=4, labels={step: "trainer"},
                   depends_on=[("dataset-initializer", "Complete"), ("model-initializer", "Complete")])]}
    assert jobset.sizes(spec)[0] == {"node": 4}
    without_depends_on = {"replicatedJobs": [{**job, "dependsOn": []} for job in spec["replicatedJobs"]]}
    assert jobset.sizes(without_depends_on) == ({"": 4}, {})


def test_the_jobset_declaring_a_member_is_the_one_its_labels_name_not_its_job():
    labels = {names.JOBSET_NAME_LABEL: "trainer", names.JOBSET_UID_LABEL: UID}
    assert jobset.INTEGRATION.declarer("g", labels, ("trainer-workers-0", "aa11")) == ("trainer", UID)
    assert jobset.INTEGRATION.part_label in jobset.INTEGRATION.kept_labels


def test_a_jobset_is_suspended_through_spec_suspend():
    assert jobset.SUSPENSION.patch({"metadata": {"resourceVersion": "3"}, "spec": {}}, True) == {
        "metadata": {"resourceVersion": "3"}, "spec": {"suspend": True}}


def tree_jobset(**annotations):
    return {"metadata": {"name": "train", "annotations": {names.TREE_ANNOTATION: names.TREE_BY_REPLICATED_JOB,
                                                          **annotations}},
            "spec": {"replicatedJobs": [replicated(f"job{i}", parallelism=4) for i in range(4)]}}


def test_a_jobset_asking_to_be_a_tree_makes_one_child_per_replicated_job_under_a_parent_named_after_it():
    declared = jobset.declaration(tree_jobset(**{names.MIN_GROUP_COUNT_ANNOTATION: "3",
                                                 names.TOPOLOGY_REQUIRED_ANNOTATION: "topology.kubernetes.io/zone"}))
    assert declared["sizes"] == {f"job{i}": 4 for i in range(4)}
    assert declared["parts"] == {f"job{i}": f"job{i}" for i in range(4)}
    assert (declared["parent"], declared["min_group_count"], declared["topology"]) == (
        "train", 3, {"required": "topology.kubernetes.io/zone"})


def test_a_trees_min_group_count_defaults_to_every_replicated_job_and_an_unreadable_one_is_zero():
    assert jobset.declaration(tree_jobset())["min_group_count"] == 4
    assert jobset.declaration(tree_jobset(**{names.MIN_GROUP_COUNT_ANNOTATION: "all"}))["min_group_count"] == 0


def test_a_jobset_not_asking_to_be_a_tree_declares_no_parent():
    plain = tree_jobset()
    plain["metadata"]["annotations"] = {names.TREE_ANNOTATION: "job"}
    assert "parent" not in jobset.declaration(plain) and jobset.declaration(plain)["sizes"] == {"": 16}
