"""The emulated Kubeflow Trainer's reconcile, pure: a TrainJob and its runtime in, the JobSet to
create, the suspend switch to set and the TrainJob's status out (sim/operators/trainjob.py)."""

import copy

import pytest

from gangkeeper.names import TRAINER_ANCESTOR_STEP_LABEL
from sim.operators.trainjob import reconcile, render_jobset, runtime_reference

NOW = 1_800_000_000.0
LATER = NOW + 60
NOW_TEXT, LATER_TEXT = "2027-01-15T08:00:00Z", "2027-01-15T08:01:00Z"
RANK_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


def container(name="node", **fields) -> dict:
    return {"name": name, "image": f"example.com/{name}:1", **fields}


def replicated_job(name="node", step="trainer", containers=None, **job_spec) -> dict:
    template = {"spec": {**job_spec, "template": {"spec": {"containers": containers or [container(name)]}}}}
    if step:
        template["metadata"] = {"labels": {TRAINER_ANCESTOR_STEP_LABEL: step}}
    return {"name": name, "replicas": 1, "template": template}


def runtime(*replicated, ml_policy=None, name="torch-distributed", kind="ClusterTrainingRuntime", metadata=None):
    template = {"spec": {"replicatedJobs": list(replicated) or [replicated_job()]}}
    if metadata:
        template["metadata"] = metadata
    spec = {"template": template}
    if ml_policy is not None:
        spec["mlPolicy"] = ml_policy
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": spec}


TORCH = {"numNodes": 1, "torch": {}}


def trainjob(name="mnist", *, runtime_name="torch-distributed", kind="ClusterTrainingRuntime", suspend=False,
             trainer=None, status=None, **spec) -> dict:
    spec = {"runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": kind, "name": runtime_name},
            "suspend": suspend, "managedBy": "trainer.kubeflow.org/trainjob-controller", **spec}
    if trainer is not None:
        spec["trainer"] = trainer
    job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
           "metadata": {"name": name, "namespace": "research", "uid": f"uid-{name}"}, "spec": spec}
    if status is not None:
        job["status"] = status
    return job


def created(job: dict, on: dict) -> dict:
    """The one JobSet the reconcile creates for a TrainJob without one."""
    [jobset] = reconcile(job, on, {}, NOW).create
    return jobset


def jobset(job: dict, on: dict, *, suspend=None, status=None) -> dict:
    """The JobSet as stored once created, its suspend switch and status changed as given."""
    stored = copy.deepcopy(render_jobset(job, on))
    stored["metadata"]["uid"] = "uid-jobset"
    if suspend is not None:
        stored["spec"]["suspend"] = suspend
    if status is not None:
        stored["status"] = status
    return stored


def replicated(jobset_: dict, name="node") -> dict:
    return next(r for r in jobset_["spec"]["replicatedJobs"] if r["name"] == name)


def node_container(jobset_: dict, job="node") -> dict:
    return next(c for c in replicated(jobset_, job)["template"]["spec"]["template"]["spec"]["containers"]
                if c["name"] == job)


def env(container_: dict) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container_.get("env") or ()}


def conditions(status: dict) -> dict:
    return {c["type"]: (c["status"], c["reason"], c["message"], c["lastTransitionTime"])
            for c in status.get("conditions") or ()}


def completed_jobset_status(moment=LATER_TEXT) -> dict:
    return {"restarts": 0, "terminalState": "Completed",
            "replicatedJobsStatus": [{"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0,
                                      "suspended": 0}],
            "conditions": [{"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
                            "message": "jobset completed successfully", "lastTransitionTime": moment}]}


# --- the JobSet rendered ---------------------------------------------------------------------------

def test_the_jobset_has_the_trainjobs_name_is_controlled_by_it_and_carries_the_runtime_templates_labels():
    job = trainjob()
    made = created(job, runtime(ml_policy=TORCH, metadata={"labels": {"team": "vision"},
                                                            "annotations": {"cost-center": "42"}}))
    assert made["apiVersion"] == "jobset.x-k8s.io/v1alpha2" and made["kind"] == "JobSet"
    assert (made["metadata"]["name"], made["metadata"]["namespace"]) == ("mnist", "research")
    assert made["metadata"]["ownerReferences"] == [{
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "mnist", "uid": "uid-mnist",
        "controller": True, "blockOwnerDeletion": True}]
    assert (made["metadata"]["labels"], made["metadata"]["annotations"]) == ({"team": "vision"}, {"cost-center": "42"})
    assert replicated(made)["template"]["metadata"]["labels"] == {TRAINER_ANCESTOR_STEP_LABEL: "trainer"}
    assert "labels" not in replicated(made)["template"]["spec"]["template"].get("metadata", {}), \
        "the step label is on the Job template, not on the pods"


def test_the_trainer_runs_the_runtimes_num_nodes_unless_the_trainjob_overrides_it():
    on = runtime(ml_policy={"numNodes": 3, "torch": {}})
    by_runtime = replicated(created(trainjob(trainer={}), on))["template"]["spec"]
    assert (by_runtime["parallelism"], by_runtime["completions"]) == (3, 3)
    by_trainjob = created(trainjob(trainer={"numNodes": 2}), on)
    spec = replicated(by_trainjob)["template"]["spec"]
    assert (spec["parallelism"], spec["completions"], replicated(by_trainjob)["replicas"]) == (2, 2, 1)
    assert env(node_container(by_trainjob))["PET_NNODES"] == "2"


def test_without_an_ml_policy_the_trainer_runs_its_own_parallelism_and_the_trainjobs_num_nodes():
    on = runtime(replicated_job(parallelism=4))
    assert replicated(created(trainjob(), on))["template"]["spec"]["completions"] == 4
    assert replicated(created(trainjob(trainer={"numNodes": 2}), on))["template"]["spec"]["parallelism"] == 2


def test_resources_per_node_replace_the_node_containers_resource_by_resource():
    on = runtime(replicated_job(containers=[container(resources={
        "limits": {"nvidia.com/gpu": 2, "cpu": "4"}, "requests": {"memory": "16Gi"}})]), ml_policy=TORCH)
    made = created(trainjob(trainer={"resourcesPerNode": {"limits": {"nvidia.com/gpu": "8"},
                                                          "requests": {"cpu": "2"}}}), on)
    assert node_container(made)["resources"] == {"limits": {"nvidia.com/gpu": "8", "cpu": "4"},
                                                 "requests": {"memory": "16Gi", "cpu": "2"}}


def test_resource_claims_of_resources_per_node_replace_the_runtimes_by_name():
    on = runtime(replicated_job(containers=[container(resources={"claims": [{"name": "gpu", "request": "one"},
                                                                            {"name": "nic"}]})]), ml_policy=TORCH)
    made = created(trainjob(trainer={"resourcesPerNode": {"claims": [{"name": "gpu", "request": "eight"}]}}), on)
    assert node_container(made)["resources"] == {"claims": [{"name": "gpu", "request": "eight"}, {"name": "nic"}]}


def test_resources_per_node_need_an_ml_policy_as_in_the_trainer():
    on = runtime(replicated_job(containers=[container(resources={"limits": {"nvidia.com/gpu": 2}})]))
    made = created(trainjob(trainer={"resourcesPerNode": {"limits": {"nvidia.com/gpu": "8"}}}), on)
    assert node_container(made)["resources"] == {"limits": {"nvidia.com/gpu": 2}}


def test_image_command_args_and_env_of_the_trainjob_replace_the_node_containers():
    on = runtime(replicated_job(containers=[container(env=[{"name": "LOG_LEVEL", "value": "info"},
                                                           {"name": "SEED", "value": "1"}]),
                                            container("sidecar")]), ml_policy=TORCH)
    made = created(trainjob(trainer={"image": "example.com/mine:2", "command": ["torchrun"], "args": ["train.py"],
                                     "env": [{"name": "SEED", "value": "7"}, {"name": "EPOCHS", "value": "3"}]}), on)
    node = node_container(made)
    assert (node["image"], node["command"], node["args"]) == ("example.com/mine:2", ["torchrun"], ["train.py"])
    assert [e["name"] for e in node["env"]][:3] == ["LOG_LEVEL", "SEED", "EPOCHS"], "upserted by name, in place"
    assert env(node)["SEED"] == "7"
    sidecar = replicated(made)["template"]["spec"]["template"]["spec"]["containers"][1]
    assert sidecar == container("sidecar"), "only the node container is the trainer's"


def test_the_torch_policy_gives_the_node_container_torchruns_rendezvous():
    made = created(trainjob(trainer={"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "4"}}}),
                   runtime(ml_policy=TORCH))
    node = node_container(made)
    assert env(node) == {"PET_NNODES": "2", "PET_NPROC_PER_NODE": "auto",
                         "PET_NODE_RANK": {"fieldRef": {"fieldPath": RANK_FIELD}},
                         "PET_MASTER_ADDR": "mnist-node-0-0.mnist", "PET_MASTER_PORT": "29500"}
    assert node["ports"] == [{"containerPort": 29500}]


@pytest.mark.parametrize(("ports", "after"), [
    ([{"containerPort": 8080}], [{"containerPort": 29500}]),
    ([{"name": "metrics", "containerPort": 9090}], [{"name": "metrics", "containerPort": 9090},
                                                    {"containerPort": 29500}]),
])
def test_the_rendezvous_port_replaces_an_unnamed_port_as_the_trainers_upsert_matches_them(ports, after):
    made = created(trainjob(trainer={}), runtime(replicated_job(containers=[container(ports=ports)]), ml_policy=TORCH))
    assert node_container(made)["ports"] == after


@pytest.mark.parametrize(("trainer", "runtime_resources", "procs"), [
    ({}, None, "1"),
    ({"resourcesPerNode": {"requests": {"cpu": "3500m"}}}, None, "4"),
    ({}, {"limits": {"cpu": "6"}}, "6"),
    ({}, {"limits": {"nvidia.com/gpu": 1}}, "auto"),
    ({"numProcPerNode": 3, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "8"}}}, None, "3"),
])
def test_processes_per_node_are_one_per_gpu_else_one_per_cpu_unless_the_trainjob_says(trainer, runtime_resources,
                                                                                        procs):
    node = container(resources=runtime_resources) if runtime_resources else container()
    made = created(trainjob(trainer=trainer), runtime(replicated_job(containers=[node]), ml_policy=TORCH))
    assert env(node_container(made))["PET_NPROC_PER_NODE"] == procs


def test_without_a_trainer_section_the_trainer_adds_no_torch_env():
    made = created(trainjob(), runtime(ml_policy=TORCH))
    assert "env" not in node_container(made) and "ports" not in node_container(made)


def test_initializers_run_one_pod_each_with_the_trainjobs_storage_uri_env_and_secret():
    on = runtime(replicated_job("dataset-initializer", "dataset-initializer", [container(
                     "dataset-initializer", env=[{"name": "STORAGE_URI", "value": "hf://tatsu-lab/alpaca"}])]),
                 replicated_job("model-initializer", "model-initializer"),
                 replicated_job(), ml_policy=TORCH)
    made = created(trainjob(initializer={"dataset": {"storageUri": "s3://bucket/data", "secretRef": {"name": "s3"},
                                                     "env": [{"name": "SPLIT", "value": "train"}]}}), on)
    dataset = node_container(made, "dataset-initializer")
    assert dataset["env"] == [{"name": "STORAGE_URI", "value": "s3://bucket/data"}, {"name": "SPLIT", "value": "train"}]
    assert dataset["envFrom"] == [{"secretRef": {"name": "s3"}}]
    assert node_container(made, "model-initializer") == container("model-initializer"), "no model given"
    for name in ("dataset-initializer", "model-initializer"):
        spec = replicated(made, name)["template"]["spec"]
        assert (replicated(made, name)["replicas"], spec["parallelism"], spec["completions"]) == (1, 1, 1)


def test_a_trainingruntime_is_looked_up_in_the_trainjobs_namespace_a_clustertrainingruntime_cluster_wide():
    assert runtime_reference(trainjob(kind="TrainingRuntime", runtime_name="mine")) == (
        "trainingruntimes", "research", "mine")
    assert runtime_reference(trainjob()) == ("clustertrainingruntimes", "", "torch-distributed")
    assert runtime_reference(trainjob(kind="MPIRuntime")) is None


# --- the suspend switch ------------------------------------------------------------------------------

@pytest.mark.parametrize("suspended", [True, False])
def test_the_jobset_is_created_with_the_trainjobs_suspend(suspended):
    assert created(trainjob(suspend=suspended), runtime(ml_policy=TORCH))["spec"]["suspend"] is suspended


@pytest.mark.parametrize(("trainjob_suspended", "jobset_suspended"), [(True, False), (False, True)])
def test_the_jobsets_suspend_follows_the_trainjobs_both_ways(trainjob_suspended, jobset_suspended):
    """Suspending or resuming the TrainJob reaches its JobSet; so does a JobSet switched on its own
    being set back: the TrainJob is the switch that sticks."""
    on = runtime(ml_policy=TORCH)
    job = trainjob(suspend=trainjob_suspended)
    stored = jobset(job, on, suspend=jobset_suspended)
    plan = reconcile(job, on, {"mnist": stored}, NOW)
    assert plan.patch == [(stored, {"spec": {"suspend": trainjob_suspended}})] and plan.create == []


def test_a_running_jobset_of_a_running_trainjob_is_left_alone():
    on = runtime(ml_policy=TORCH)
    job = trainjob()
    plan = reconcile(job, on, {"mnist": jobset(job, on)}, NOW)
    assert (plan.create, plan.patch, plan.retry) == ([], [], False)


def test_a_finished_trainjobs_jobset_is_never_written_again():
    on = runtime(ml_policy=TORCH)
    job = trainjob(suspend=True, status={"conditions": [{"type": "Complete", "status": "True", "reason": "AllJobsCompleted",
                                                          "message": "jobset completed successfully",
                                                          "lastTransitionTime": NOW_TEXT}]})
    plan = reconcile(job, on, {"mnist": jobset(job, on, suspend=False, status=completed_jobset_status())}, LATER)
    assert (plan.create, plan.patch) == ([], [])


# --- the runtime missing, unsupported or another controller's TrainJob -------------------------------

def test_a_trainjob_whose_runtime_is_missing_gets_no_jobset_no_condition_and_is_retried():
    plan = reconcile(trainjob(), None, {}, NOW)
    assert (plan.create, plan.status, plan.retry) == ([], None, True)


def test_a_suspended_trainjob_whose_runtime_is_missing_still_says_it_is_suspended():
    plan = reconcile(trainjob(suspend=True), None, {}, NOW)
    assert plan.create == [] and plan.retry
    assert conditions(plan.status) == {"Suspended": ("True", "Suspended", "TrainJob is suspended", NOW_TEXT)}


def test_a_runtime_kind_the_trainer_does_not_serve_gets_nothing_written():
    plan = reconcile(trainjob(kind="MPIRuntime", suspend=True), None, {}, NOW)
    assert (plan.create, plan.status, plan.retry) == ([], None, False)


def test_a_trainjob_managed_by_another_controller_is_left_alone():
    plan = reconcile(trainjob(managedBy="kueue.x-k8s.io/multikueue"), runtime(ml_policy=TORCH), {}, NOW)
    assert (plan.create, plan.status, plan.retry) == ([], None, False)


# --- status --------------------------------------------------------------------------------------

def test_suspended_then_resumed_as_the_trainer_says_it():
    on = runtime(ml_policy=TORCH)
    suspended = trainjob(suspend=True)
    suspended["status"] = reconcile(suspended, on, {"mnist": jobset(suspended, on)}, NOW).status
    assert conditions(suspended["status"]) == {"Suspended": ("True", "Suspended", "TrainJob is suspended", NOW_TEXT)}
    resumed = dict(suspended, spec=dict(suspended["spec"], suspend=False))
    status = reconcile(resumed, on, {"mnist": jobset(resumed, on, suspend=True)}, LATER).status
    assert conditions(status) == {"Suspended": ("False", "Resumed", "TrainJob is resumed", LATER_TEXT)}


def test_a_trainjob_never_suspended_has_no_condition_while_it_runs_and_mirrors_its_jobs():
    on = runtime(ml_policy=TORCH)
    job = trainjob()
    running = {"restarts": 0, "replicatedJobsStatus": [{"name": "node", "ready": 1, "succeeded": 0, "failed": 0,
                                                        "active": 1, "suspended": 0}]}
    status = reconcile(job, on, {"mnist": jobset(job, on, status=running)}, NOW).status
    assert status == {"jobsStatus": [{"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1,
                                      "suspended": 0}]}


def test_complete_is_the_jobsets_completed_condition_with_its_reason_message_and_time():
    on = runtime(ml_policy=TORCH)
    job = trainjob()
    status = reconcile(job, on, {"mnist": jobset(job, on, status=completed_jobset_status(NOW_TEXT))}, LATER).status
    assert conditions(status) == {"Complete": ("True", "AllJobsCompleted", "jobset completed successfully", NOW_TEXT)}
    assert status["jobsStatus"][0]["succeeded"] == 1


def test_failed_is_the_jobsets_failed_condition():
    on = runtime(ml_policy=TORCH)
    job = trainjob()
    failed = {"terminalState": "Failed", "conditions": [{"type": "Failed", "status": "True", "reason": "FailedJobs",
                                                         "message": "jobset failed due to failed job",
                                                         "lastTransitionTime": NOW_TEXT, "observedGeneration": 2}]}
    status = reconcile(job, on, {"mnist": jobset(job, on, status=failed)}, LATER).status
    assert conditions(status) == {"Failed": ("True", "FailedJobs", "jobset failed due to failed job", NOW_TEXT)}
    assert status["conditions"][0]["observedGeneration"] == 2


def test_a_reconcile_with_nothing_new_writes_nothing():
    on = runtime(ml_policy=TORCH)
    job = trainjob(suspend=True)
    stored = jobset(job, on, status=completed_jobset_status())
    job["status"] = reconcile(job, on, {"mnist": stored}, NOW).status
    again = reconcile(job, on, {"mnist": stored}, LATER)
    assert (again.status, again.create, again.patch) == (None, [], [])
