"""The emulated JobSet controller honours `dependsOn` as JobSet's depends_on.go does: a replicated
job's Jobs are created only once the replicated jobs it depends on are Complete (all their Jobs
succeeded) or Ready (all ready, failed or succeeded), counted from the JobSet's own
`replicatedJobsStatus`; and the shipped example runs its stages in order to completion on the
emulated cluster, in a namespace gangkeeper leaves alone.
"""

import copy
from pathlib import Path

import jsonschema
import pytest
import yaml

from gangkeeper import names
from sim.cluster import emulated_cluster
from sim.names import DURATION_ANNOTATION
from sim.operators.jobset import child_job, reconcile
from sim.spec import load
from study.policies import gangkeeper_api
from tests.crds import ecosystem_crd, openapi_schema, structural
from tests.sim_cluster.served_schemas import validator

ECOSYSTEM = Path(__file__).parents[1] / "fixtures" / "ecosystem"
NS = "staged"
NOW = 1_000.0
CONTAINER = {"name": "main", "image": "busybox"}

# --- the pure reconcile ---------------------------------------------------------------------


def replicated(name, replicas=1, depends=()):
    template = {"spec": {"parallelism": 1, "completions": 1,
                         "template": {"spec": {"restartPolicy": "Never", "containers": [CONTAINER]}}}}
    entry = {"name": name, "replicas": replicas, "template": template}
    if depends:
        entry["dependsOn"] = [{"name": on, "status": status} for on, status in depends]
    return entry


def jobset(*replicated_jobs, order=None, suspend=False):
    spec = {"replicatedJobs": list(replicated_jobs), "suspend": suspend}
    if order:
        spec["startupPolicy"] = {"startupPolicyOrder": order}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "staged", "namespace": NS, "uid": "jobset-uid"}, "spec": spec}


COMPLETE = {"type": "Complete", "status": "True"}
FAILED = {"type": "Failed", "status": "True"}
STATES = {  # a Job of one pod, as its controller reports it
    "pending": {"active": 1, "ready": 0, "succeeded": 0},
    "ready": {"active": 1, "ready": 1, "succeeded": 0},
    "suspended": {"active": 0, "ready": 0, "succeeded": 0},
    "complete": {"active": 0, "ready": 0, "succeeded": 1, "conditions": [COMPLETE]},
    "failed": {"active": 0, "ready": 0, "succeeded": 0, "failed": 7, "conditions": [FAILED]},
}


def job(owner, name, index=0, state="pending"):
    """The Job the JobSet made for replica `index` of replicated job `name`, in `state`."""
    entry = next(r for r in owner["spec"]["replicatedJobs"] if r["name"] == name)
    made = child_job(owner, entry, index, index, 1)
    made["metadata"]["uid"] = f"{name}-{index}-uid"
    made["spec"]["suspend"] = state == "suspended"
    made["status"] = copy.deepcopy(STATES[state])
    return made


def children(*jobs):
    return {j["metadata"]["name"]: j for j in jobs}


def created(owner, jobs=()):
    return [j["metadata"]["name"] for j in reconcile(owner, children(*jobs), NOW).create]


def resumed(owner, jobs):
    return [j["metadata"]["name"] for j, patch in reconcile(owner, children(*jobs), NOW).patch
            if patch == {"spec": {"suspend": False}}]


def test_a_jobset_without_depends_on_creates_every_job_at_once():
    owner = jobset(replicated("initializer"), replicated("launcher"), replicated("worker", replicas=2))
    assert created(owner) == ["staged-initializer-0", "staged-launcher-0", "staged-worker-0", "staged-worker-1"]


def test_a_complete_dependency_waits_until_every_job_of_it_succeeded():
    owner = jobset(replicated("initializer", replicas=2),
                   replicated("launcher", depends=[("initializer", "Complete")]))
    assert created(owner) == ["staged-initializer-0", "staged-initializer-1"]
    one_done = (job(owner, "initializer", 0, "complete"), job(owner, "initializer", 1, "ready"))
    assert created(owner, one_done) == []
    both_done = (job(owner, "initializer", 0, "complete"), job(owner, "initializer", 1, "complete"))
    assert created(owner, both_done) == ["staged-launcher-0"]


def test_a_ready_dependency_counts_ready_failed_and_succeeded_jobs():
    owner = jobset(replicated("launcher", replicas=3), replicated("worker", depends=[("launcher", "Ready")]))
    one_pending = (job(owner, "launcher", 0, "ready"), job(owner, "launcher", 1, "failed"),
                   job(owner, "launcher", 2, "pending"))
    assert created(owner, one_pending) == []
    all_started = (job(owner, "launcher", 0, "ready"), job(owner, "launcher", 1, "failed"),
                   job(owner, "launcher", 2, "complete"))
    assert created(owner, all_started) == ["staged-worker-0"]
    [launcher, _] = reconcile(owner, children(*all_started), NOW).status["replicatedJobsStatus"]
    assert launcher == {"name": "launcher", "ready": 1, "succeeded": 1, "failed": 1, "active": 1, "suspended": 0}


def test_a_dependency_on_two_replicated_jobs_waits_for_both():
    owner = jobset(replicated("dataset"), replicated("model"),
                   replicated("node", replicas=2, depends=[("dataset", "Complete"), ("model", "Complete")]))
    assert created(owner, (job(owner, "dataset", state="complete"), job(owner, "model", state="ready"))) == []
    assert created(owner, (job(owner, "dataset", state="complete"), job(owner, "model", state="complete"))) == [
        "staged-node-0", "staged-node-1"]


def test_depends_on_and_in_order_startup_must_both_allow_a_replicated_job():
    """The real API refuses the two together (a CEL rule of the CRD); given both, each holds back."""
    owner = jobset(replicated("a"), replicated("b", depends=[("a", "Complete")]),
                   replicated("c", depends=[("a", "Ready")]), order="InOrder")
    # a is ready: c's dependency is reached, but InOrder keeps c behind b, which waits for a to complete
    assert created(owner, (job(owner, "a", state="ready"),)) == []
    assert created(owner, (job(owner, "a", state="complete"),)) == ["staged-b-0"]
    assert created(owner, (job(owner, "a", state="complete"), job(owner, "b", state="ready"))) == ["staged-c-0"]


def test_a_resumed_jobset_resumes_each_stage_once_its_dependencies_are_reached_again():
    stages = (replicated("initializer"), replicated("launcher", depends=[("initializer", "Complete")]),
              replicated("worker", depends=[("launcher", "Ready")]))
    owner = jobset(*stages)
    suspended = (job(owner, "initializer", state="complete"), job(owner, "launcher", state="suspended"),
                 job(owner, "worker", state="suspended"))
    assert resumed(owner, suspended) == ["staged-launcher-0"]
    launcher_ready = (job(owner, "initializer", state="complete"), job(owner, "launcher", state="ready"),
                      job(owner, "worker", state="suspended"))
    assert resumed(owner, launcher_ready) == ["staged-worker-0"]
    running = (job(owner, "initializer", state="complete"), job(owner, "launcher", state="ready"),
               job(owner, "worker", state="pending"))
    suspending = reconcile(jobset(*stages, suspend=True), children(*running), NOW).patch
    assert [(j["metadata"]["name"], patch) for j, patch in suspending] == [
        ("staged-launcher-0", {"spec": {"suspend": True}}), ("staged-worker-0", {"spec": {"suspend": True}})]


# --- the shipped example on the emulated cluster ----------------------------------------------


def example(durations: dict[str, int]) -> dict:
    """examples/jobset-depends-on.yaml, each replicated job's pods running for its duration."""
    manifest = yaml.safe_load((ECOSYSTEM / "examples" / "jobset-depends-on.yaml").read_text())
    for entry in manifest["spec"]["replicatedJobs"]:
        pod_template = entry["template"]["spec"]["template"]
        pod_template.setdefault("metadata", {})["annotations"] = {DURATION_ANNOTATION: str(durations[entry["name"]])}
    return manifest


def crd_validator() -> jsonschema.Draft202012Validator:
    """The real JobSet CRD's schema, every field it does not declare refused (the server prunes them)."""
    return validator(structural(openapi_schema(ecosystem_crd("jobset.x-k8s.io_jobsets"), "v1alpha2")))


def first(events, happened) -> int:
    return next(position for position, event in enumerate(events) if happened(event))


def added(name):
    return lambda event: event.type == "ADDED" and event.object["metadata"]["name"] == name


def job_status(name, test):
    return lambda event: (event.resource == "jobs" and event.object["metadata"]["name"] == name
                          and test(event.object.get("status") or {}))


@pytest.fixture
def staged_run(clock):
    """The example run to its end on the emulated API server with gangkeeper's webhook installed, in
    a namespace it does not enforce; with every Job and pod event, in commit order."""
    api, _ = gangkeeper_api(clock.now)
    api.create("namespaces", {"metadata": {"name": NS}})
    events = []
    api.subscribe(lambda event: events.append(event) if event.resource in ("jobs", "pods") else None)
    cluster = emulated_cluster(api, clock, spec=load("nodes: [{count: 2, gpusPerNode: 8}]"))
    api.create("jobsets", example({"initializer": 10, "launcher": 20, "worker": 20}), namespace=NS)
    assert cluster.run_until_idle(clock.now() + 3600)
    return api, events


def test_the_example_creates_each_stage_only_once_the_one_before_reached_its_status(staged_run):
    _, events = staged_run
    initializer_complete = first(events, job_status("depends-on-initializer-0", lambda s: any(
        c["type"] == "Complete" and c["status"] == "True" for c in s.get("conditions") or ())))
    launcher_ready = first(events, job_status("depends-on-launcher-0", lambda s: s.get("ready", 0) >= 1))
    assert first(events, added("depends-on-launcher-0")) > initializer_complete
    assert first(events, added("depends-on-worker-0")) > launcher_ready > initializer_complete


def test_the_example_runs_to_completion_without_gates(staged_run):
    api, events = staged_run
    served = api.get("jobsets", "depends-on", namespace=NS)
    assert served["status"]["terminalState"] == "Completed"
    assert {c["type"]: c["status"] for c in served["status"]["conditions"]} == {"Completed": "True"}
    assert [(s["name"], s["succeeded"]) for s in served["status"]["replicatedJobsStatus"]] == [
        ("initializer", 1), ("launcher", 1), ("worker", 1)]
    pods = api.list("pods", namespace=NS)
    assert len(pods) == 6 and all(p["status"]["phase"] == "Succeeded" for p in pods)
    assert not [e for e in events if e.resource == "pods" and any(
        g["name"] == names.SCHEDULING_GATE for g in e.object["spec"].get("schedulingGates") or ())]
    crd_validator().validate(served)


def test_the_crd_check_accepts_depends_on_and_refuses_a_status_the_real_api_refuses():
    manifest = example({"initializer": 10, "launcher": 20, "worker": 20})
    crd_validator().validate(manifest)
    manifest["spec"]["replicatedJobs"][1]["dependsOn"][0]["status"] = "Started"
    with pytest.raises(jsonschema.ValidationError, match=r"'Started' is not one of \['Ready', 'Complete'\]"):
        crd_validator().validate(manifest)
