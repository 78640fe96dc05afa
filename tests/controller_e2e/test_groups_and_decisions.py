"""Pure: group sizes from owners, and the release patch."""

import pytest

from gangkeeper import names
from gangkeeper.controller.cache.groups import (
    GANGS,
    JOBS,
    JOBSETS,
    PODGROUPS_NATIVE,
    PYTORCHJOBS,
    build_groups,
    dependencies,
    settled_phase,
)
from gangkeeper.controller.deciding.patches import release_patch
from gangkeeper.controller.reading.pods import pod_facts
from gangkeeper.controller.reading.workloads import workload_from_api
from gangkeeper.integrations import lws, mpijob
from tests import builders
from tests.controller.builders import replace


def pod(name, group, source, labels=None, annotations=None, owner=None, affinity=None):
    manifest = builders.pod(name, namespace="ns", uid=f"u-{name}", labels={names.GROUP_LABEL: group, **(labels or {})},
                            annotations={names.GROUP_SOURCE_ANNOTATION: source, **(annotations or {})},
                            owners=[builders.owner(owner[0], owner[1], owner[2], "x/v1")] if owner else (),
                            gates=("other.io/gate", names.SCHEDULING_GATE),
                            containers=[builders.container("c", gpus=8)],
                            **({"affinity": affinity} if affinity else {}))
    manifest["metadata"]["resourceVersion"] = "7"
    return pod_facts(manifest)


LEADERWORKERSETS = lws.RESOURCE.name


def lws_member(worker_index, owner_uid="sts"):
    """A pod of LWS `ws`'s group 0: worker index 0 is its leader. Its owner is a StatefulSet, never the LWS."""
    labels = {names.LWS_NAME_LABEL: "ws", names.LWS_WORKER_INDEX_LABEL: str(worker_index)}
    return pod(f"ws-0-{worker_index}", "g", names.SOURCE_LEADERWORKERSET, labels=labels,
               owner=("StatefulSet", "ws" if worker_index == 0 else "ws-0", owner_uid))


def index(resource, obj):
    workload = workload_from_api(resource, {"metadata": {"namespace": "ns", "uid": "w1", **obj.pop("metadata")}, **obj})
    return {(resource, "ns", workload.name): workload}


MPIJOBS = mpijob.RESOURCE.name


def mpi_members(workers=2, phase="Pending"):
    """MPIJob `pi`'s launcher (a pod of its Job `pi-launcher`, uid j1) and workers (owned by it, uid w1)."""
    launcher = pod("pi-launcher-x7k2p", "g", names.SOURCE_MPIJOB, owner=("Job", "pi-launcher", "j1"), labels={
        names.KUBEFLOW_JOB_NAME_LABEL: "pi", names.KUBEFLOW_JOB_ROLE_LABEL: names.MPI_LAUNCHER})
    members = [launcher] + [pod(f"pi-worker-{i}", "g", names.SOURCE_MPIJOB, owner=("MPIJob", "pi", "w1"), labels={
        names.KUBEFLOW_JOB_NAME_LABEL: "pi", names.KUBEFLOW_JOB_ROLE_LABEL: names.MPI_WORKER}) for i in range(workers)]
    return [replace(m, member=replace(m.member, phase=phase)) for m in members]


def mpijob_workloads(job_controller="w1", status=None, **spec):
    """MPIJob `pi` (uid w1, 2 workers) and its launcher Job (uid j1), which `job_controller` controls."""
    workloads = index(MPIJOBS, {"metadata": {"name": "pi"}, "status": status or {}, "spec": {
        "mpiReplicaSpecs": {"Launcher": {"replicas": 1}, "Worker": {"replicas": 2}}, **spec}})
    job = workload_from_api(JOBS, {"metadata": {"name": "pi-launcher", "namespace": "ns", "uid": "j1", "ownerReferences": [
        {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": "pi", "uid": job_controller,
         "controller": True}]}, "spec": {}})
    return {**workloads, (JOBS, "ns", "pi-launcher"): job}


CASES = [
    ("pytorchjob", [pod(f"p{i}", "g", names.SOURCE_PYTORCHJOB, owner=("PyTorchJob", "pj", "w1")) for i in range(2)],
     index(PYTORCHJOBS, {"metadata": {"name": "pj"}, "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1},
                                                                                      "Worker": {"replicas": 3}}}}),
     {("ns", "g"): 4}),
    ("elastic pytorchjob", [pod("p0", "g", names.SOURCE_PYTORCHJOB, owner=("PyTorchJob", "pj", "w1"))],
     index(PYTORCHJOBS, {"metadata": {"name": "pj"}, "spec": {"elasticPolicy": {"minReplicas": 2},
                                                              "pytorchReplicaSpecs": {"Worker": {"replicas": 4}}}}),
     {("ns", "g"): 2}),
    ("jobset", [pod("p0", "g", names.SOURCE_JOBSET, labels={names.JOBSET_NAME_LABEL: "js", names.JOBSET_UID_LABEL: "w1"})],
     index(JOBSETS, {"metadata": {"name": "js"}, "spec": {"replicatedJobs": [
         {"name": "a", "replicas": 2, "template": {"spec": {"parallelism": 4, "completions": 4}}},
         {"name": "b", "template": {"spec": {"parallelism": 3, "completions": 1}}}]}}),
     {("ns", "g"): 9}),
    ("jobset in order", [pod(f"p{r}", "g", names.SOURCE_JOBSET, labels={
        names.JOBSET_NAME_LABEL: "js", names.JOBSET_UID_LABEL: "w1", names.JOBSET_REPLICATED_JOB_LABEL: r})
        for r in ("a", "b")],
     index(JOBSETS, {"metadata": {"name": "js"}, "spec": {"startupPolicy": {"startupPolicyOrder": "InOrder"},
                                                          "replicatedJobs": [
         {"name": "a", "replicas": 2, "template": {"spec": {"parallelism": 4}}},
         {"name": "b", "template": {"spec": {"parallelism": 1}}}]}}),
     {("ns", "g/a"): 8, ("ns", "g/b"): 1}),
    ("jobset in stages", [pod(f"p-{r}", "g", names.SOURCE_JOBSET, labels={
        names.JOBSET_NAME_LABEL: "js", names.JOBSET_UID_LABEL: "w1", names.JOBSET_REPLICATED_JOB_LABEL: r})
        for r in ("driver", "workers", "launcher")],
     index(JOBSETS, {"metadata": {"name": "js"}, "spec": {"replicatedJobs": [
         {"name": "driver", "template": {"spec": {"parallelism": 1}}},
         {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 4}}},
         {"name": "launcher", "dependsOn": [{"name": "workers", "status": "Ready"}],
          "template": {"spec": {"parallelism": 1}}}]}}),
     {("ns", "g/driver"): 9, ("ns", "g/launcher"): 1}),
    ("indexed job", [pod("p0", "g", names.SOURCE_JOB, owner=("Job", "j", "w1"))],
     index(JOBS, {"metadata": {"name": "j"}, "spec": {"parallelism": 8, "completions": 4,
                                                      "completionMode": "Indexed"}}), {("ns", "g"): 4}),
    ("plain pods", [pod(f"p{i}", "g", names.SOURCE_EXPLICIT, annotations={names.MIN_COUNT_ANNOTATION: "3"})
                    for i in range(2)], {}, {("ns", "g"): 3}),
    ("explicit gang", [pod("p0", "g", names.SOURCE_EXPLICIT)],
     index(GANGS, {"metadata": {"name": "g"}, "spec": {"minCount": 5}}), {("ns", "g"): 5}),
    ("native podgroup", [pod("p0", "g", names.SOURCE_NATIVE_POD_GROUP, labels={names.NATIVE_POD_GROUP_LABEL: "g"})],
     index(PODGROUPS_NATIVE, {"metadata": {"name": "g"}, "spec": {"schedulingPolicy": {"gang": {"minCount": 6}}}}),
     {("ns", "g"): 6}),
    ("lone pods", [pod(f"p{i}", f"p{i}", names.SOURCE_ACCELERATOR_POD) for i in range(2)], {},
     {("ns", "p0/pod/p0"): 1, ("ns", "p1/pod/p1"): 1}),
    ("leaderworkerset", [lws_member(w, owner_uid=f"sts-{w > 0}") for w in range(4)],
     index(LEADERWORKERSETS, {"metadata": {"name": "ws"}, "spec": {"leaderWorkerTemplate": {"size": 4}}}),
     {("ns", "g"): 4}),
    ("leaderworkerset leader ready", [lws_member(w) for w in range(4)],
     index(LEADERWORKERSETS, {"metadata": {"name": "ws"}, "spec": {"startupPolicy": "LeaderReady",
                                                                   "leaderWorkerTemplate": {"size": 4}}}),
     {("ns", "g/leader"): 1, ("ns", "g/workers"): 3}),
    ("mpijob", mpi_members(), mpijob_workloads(), {("ns", "g"): 3}),
    ("mpijob waiting for its workers", mpi_members(),
     mpijob_workloads(launcherCreationPolicy=names.MPI_WAIT_FOR_WORKERS_READY),
     {("ns", "g/worker"): 2, ("ns", "g/launcher"): 1}),
]


@pytest.mark.parametrize("pods, workloads, sizes", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_group_sizes(pods, workloads, sizes):
    views = build_groups(pods, workloads, {}, 0.0)
    assert {v.group.key: v.group.min_count for v in views} == sizes
    assert all(v.problem is None for v in views)


def test_disagreeing_declarations_reserve_nothing():
    pods = [pod("p0", "g", names.SOURCE_EXPLICIT, annotations={names.MIN_COUNT_ANNOTATION: "2"}),
            pod("p1", "g", names.SOURCE_EXPLICIT, annotations={names.MIN_COUNT_ANNOTATION: "3"})]
    (view,) = build_groups(pods, {}, {}, 0.0)
    assert view.problem[0] == "Disagreement" and view.group.min_count == 0


def test_release_patch_pins_every_term_and_removes_only_our_gate():
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["bad"]}]}]}}}
    facts = pod("p0", "g", names.SOURCE_EXPLICIT, affinity=affinity)
    pin = {"key": "metadata.name", "operator": "In", "values": ["n1"]}
    terms = "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms"
    assert list(release_patch(facts, "n1")) == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
        {"op": "add", "path": f"{terms}/0/matchFields", "value": [pin]},
        {"op": "add", "path": f"{terms}/1/matchFields/-", "value": pin},
        {"op": "test", "path": "/spec/schedulingGates/1/name", "value": names.SCHEDULING_GATE},
        {"op": "remove", "path": "/spec/schedulingGates/1"}]


def test_release_patch_adds_a_term_when_there_is_none():
    facts = pod("p0", "g", names.SOURCE_EXPLICIT, affinity={"podAffinity": {}})
    op = release_patch(facts, "n1")[1]
    assert op == {"op": "add", "path": "/spec/affinity/nodeAffinity", "value": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}


def test_a_pod_labelled_into_a_jobs_group_is_set_apart_not_counted():
    """Someone labels their own pod with a PyTorchJob's group: the webhook marks it `explicit`.
    The job's group keeps its size and stays reservable; the impostor is a group of its own that
    is never reserved, with a reason saying why."""
    job = index(PYTORCHJOBS, {"metadata": {"name": "pj"}, "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 2}}}})
    members = [pod(f"p{i}", "g", names.SOURCE_PYTORCHJOB, owner=("PyTorchJob", "pj", "w1")) for i in range(2)]
    impostor = pod("sneaky", "g", names.SOURCE_EXPLICIT, annotations={names.MIN_COUNT_ANNOTATION: "1"})
    views = {view.group.key: view for view in build_groups([*members, impostor], job, {}, 0.0)}
    assert views[("ns", "g")].problem is None
    assert [m.name for m in views[("ns", "g")].group.members] == ["p0", "p1"]
    assert views[("ns", "g/pod/sneaky")].problem[0] == "NotAMember"


def test_members_of_two_sources_none_a_jobs_disagree_and_stay_one_group():
    pods = [pod("p0", "g", names.SOURCE_EXPLICIT, annotations={names.MIN_COUNT_ANNOTATION: "2"}),
            pod("p1", "g", names.SOURCE_NATIVE_POD_GROUP, annotations={names.MIN_COUNT_ANNOTATION: "2"})]
    (view,) = build_groups(pods, {}, {}, 0.0)
    assert [m.name for m in view.group.members] == ["p0", "p1"]
    assert view.problem == ("Disagreement", "members name different group sources: ['explicit', 'native-podgroup']")


def created(facts, stamp):
    """The pod's facts with its creation time (`pod` leaves it unset)."""
    return replace(facts, member=replace(facts.member, created=stamp))


@pytest.mark.parametrize("timeouts, expected", [((None, "20", "30"), 20.0), (("", "soon", "30"), None),
                                                ((None, None, None), None)])
def test_a_group_waits_the_timeout_of_its_first_member_that_declares_one(timeouts, expected):
    pods = [pod(f"p{i}", "g", names.SOURCE_EXPLICIT, annotations={names.MIN_COUNT_ANNOTATION: "3",
                                                                  **({names.SCHEDULE_TIMEOUT_ANNOTATION: t}
                                                                     if t is not None else {})})
            for i, t in enumerate(timeouts)]
    (view,) = build_groups(reversed(pods), {}, {}, 0.0)
    assert view.group.schedule_timeout_seconds == expected


def test_a_group_is_first_seen_when_its_oldest_member_was_created_unless_remembered():
    pods = [created(pod("p0", "g", names.SOURCE_EXPLICIT, annotations={names.MIN_COUNT_ANNOTATION: "3"}), 50.0),
            pod("p1", "g", names.SOURCE_EXPLICIT, annotations={names.MIN_COUNT_ANNOTATION: "3"}),
            created(pod("p2", "g", names.SOURCE_EXPLICIT, annotations={names.MIN_COUNT_ANNOTATION: "3"}), 40.0)]
    assert build_groups(pods, {}, {}, 100.0)[0].group.first_seen == 40.0
    assert build_groups(pods[1:2], {}, {}, 100.0)[0].group.first_seen == 100.0  # none known: now
    assert build_groups(pods, {}, {("ns", "g"): 7.0}, 100.0)[0].group.first_seen == 7.0


def test_an_mpijobs_launcher_is_a_member_only_through_a_launcher_job_the_mpijob_controls():
    (view,) = build_groups(mpi_members(), mpijob_workloads(job_controller="someone-else"), {}, 0.0)
    assert view.problem == ("UnknownSize", "MPIJob pi controlling jobs.batch pi-launcher, the pod's owner, "
                                           "not in the cache (yet)")
    (view,) = build_groups(mpi_members(), {key: w for key, w in mpijob_workloads().items() if key[0] == MPIJOBS}, {},
                           0.0)
    assert view.problem[0] == "UnknownSize", "its Job not seen yet"


def test_an_mpijobs_launcher_depends_on_its_job_and_the_mpijob():
    launcher, worker = mpi_members(workers=1)
    assert set(dependencies(launcher)) == {(GANGS, "ns", "g"), (MPIJOBS, "ns", "pi"), (JOBS, "ns", "pi-launcher")}
    assert set(dependencies(worker)) == {(GANGS, "ns", "g"), (MPIJOBS, "ns", "pi")}


def test_a_group_whose_mpijob_succeeded_has_succeeded_once_its_workers_were_cleaned_up():
    """cleanPodPolicy deletes the workers still running once the MPIJob ended: only its launcher remains."""
    launcher = mpi_members(workers=0, phase="Succeeded")
    ended = {"conditions": [{"type": "Succeeded", "status": "True"}], "completionTime": "2027-01-15T08:00:00Z"}
    (view,) = build_groups(launcher, mpijob_workloads(status=ended), {}, 0.0)
    assert view.finished == "Succeeded" and settled_phase(view) == "Succeeded"
    (unknown_end,) = build_groups(launcher, mpijob_workloads(), {}, 0.0)
    assert settled_phase(unknown_end) == "Failed", "by its pods alone: 1 of 3 succeeded"
