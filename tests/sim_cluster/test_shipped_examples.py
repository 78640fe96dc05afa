"""The ecosystem's shipped examples, applied with kubectl to the playground as a user applies them.

One playground serves the module: `gangkeeper sim serve --run-seconds 5` with 8 nodes of 8 GPUs,
gangkeeper's real webhook and controller as its children. Every example is applied at the start,
each into an enforced namespace of its own (`kubectl apply -n NAMESPACE -f`), so they run side by
side; a test waits for its own with `kubectl wait` (the owner Complete, or an LWS Available: a
server never completes) and then judges it by what the API served:

- which pods each Gang reserved (its `status.reservations`, over its whole life), and that they
  carry the group label the Gang declares;
- that every gang was placed whole before its first member was bound, released only once all of
  it was reserved, and that nothing held GPUs while its group was partly placed: the module
  watches pods, Gangs and nodes through the API from before the first apply (one watch-list of
  each, merged by resourceVersion, which the API server counts for all kinds at once), and a test
  replays what was recorded up to its example's end through `sim.invariants.Checker`.

The examples are copies of tests/fixtures/ecosystem/examples/ whose training part asks for GPUs
(patched as test_ray_gangs does): a TrainJob on each of the two Trainer runtimes, the JobSet
`dependsOn` example, the LWS with 2 replica groups under each startup policy, the RayJob; and the
same with the staging removed where an example stages its start (the JobSet and the torchtune
runtime without `dependsOn`; the LWS's is LeaderCreated), one gang each where they should be. Pods
that run real programs (torchrun, `tune run`, `ray job submit`) finish after `--run-seconds`; those
that sleep, after their sleeps.

The MPIJob (examples/mpijob-pi.yaml) runs as shipped, its workers asking for a GPU each, and under
`WaitForWorkersReady` too; its `cleanPodPolicy: Running` deletes the workers once the launcher
has succeeded, so its pods are read from the recording, deleted ones included.
"""

import base64
import http.client
import json
import shlex
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import yaml

from demo.processes import free_port
from gangkeeper import names
from sim.invariants import Checker, group_label
from sim.names import NODES, PODS
from sim.reservations import GANGS
from tests.recorded import FIXTURES
from tests.sim_cluster.playground import Served, line_after

pytestmark = pytest.mark.e2e

SHIPPED = FIXTURES / "ecosystem" / "examples"
KUBECTL = Path(sys.executable).parent / "kubectl"
RUN_SECONDS = 5
GPU_NODES = 8  # 64 GPUs: every example at once asks for 50
WAIT = "300s"  # a deadline for an example to finish on a slow machine, every example running at once
CAUGHT_UP_SECONDS = 60  # watches send a bookmark every 5 s when nothing changes
# The controller's defaults, as the playground runs it: the bind timeout and the resync.
BIND_TIMEOUT, RESYNC = 120.0, 30.0
GPU = "nvidia.com/gpu"


# --- the examples, as the tests apply them ------------------------------------------------------

def shipped(name: str) -> list[dict]:
    return [document for document in yaml.safe_load_all((SHIPPED / name).read_text()) if document]


def trainjob(name: str, runtime: str, **trainer) -> dict:
    """A TrainJob as a user writes one: a runtime, 2 nodes, and whatever else is given."""
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": name},
            "spec": {"runtimeRef": {"name": runtime}, "trainer": {"numNodes": 2, **trainer}}}


def torch_distributed() -> list[dict]:
    """The shipped runtime as it is, and a TrainJob on it asking for 2 GPUs per node."""
    return [*shipped("trainer-runtime-torch-distributed.yaml"),
            trainjob("dist", "torch-distributed", resourcesPerNode={"limits": {GPU: "2"}})]


def torchtune(*, staged: bool = True) -> list[dict]:
    """The shipped torchtune runtime (2 GPUs per node as shipped) and a TrainJob on it; `staged=False`:
    a copy of the runtime without `dependsOn`, so its initializers and nodes start at once."""
    [runtime] = shipped("trainer-runtime-torchtune-llama3.2-1b.yaml")
    if not staged:
        runtime["metadata"]["name"] += "-at-once"
        for replicated in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
            replicated.pop("dependsOn", None)
    return [runtime, trainjob("tune", runtime["metadata"]["name"])]


def depends_on(*, staged: bool = True) -> list[dict]:
    """The JobSet `dependsOn` example, its workers asking for 2 GPUs each; `staged=False` removes
    its `dependsOn`, so every replicated job starts at once."""
    [jobset] = shipped("jobset-depends-on.yaml")
    for replicated in jobset["spec"]["replicatedJobs"]:
        if replicated["name"] == "worker":
            container = replicated["template"]["spec"]["template"]["spec"]["containers"][0]
            container["resources"] = {"limits": {GPU: "2"}}
        if not staged:
            replicated.pop("dependsOn", None)
    return [jobset]


def leaderworkerset(startup_policy: str | None) -> list[dict]:
    """The shipped LWS with 2 replica groups of 4 pods asking for a GPU each, under `startup_policy`
    (None: as shipped, which is LeaderCreated)."""
    [lws] = shipped("leaderworkerset.yaml")
    lws["spec"]["replicas"] = 2
    if startup_policy:
        lws["spec"]["startupPolicy"] = startup_policy
    lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["resources"]["limits"][GPU] = "1"
    return [lws]


def rayjob() -> list[dict]:
    """The shipped RayJob and the ConfigMap of its code, its worker asking for 2 GPUs."""
    job, code = shipped("rayjob.yaml")
    worker = job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    worker["resources"]["limits"][GPU] = "2"
    return [job, code]


def mpijob(launcher_creation_policy: str | None) -> list[dict]:
    """The shipped MPIJob, its 2 workers asking for a GPU each, under `launcher_creation_policy`
    (None: as shipped, which is AtStartup)."""
    [job] = shipped("mpijob-pi.yaml")
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    worker["resources"]["limits"][GPU] = "1"
    if launcher_creation_policy:
        job["spec"]["launcherCreationPolicy"] = launcher_creation_policy
    return [job]


# Namespace → what is applied into it.
EXAMPLES: dict[str, Callable[[], list[dict]]] = {
    "trainer-torch": torch_distributed,
    "trainer-torchtune": torchtune,
    "trainer-torchtune-at-once": lambda: torchtune(staged=False),
    "jobset-staged": depends_on,
    "jobset-at-once": lambda: depends_on(staged=False),
    "lws-leader-created": lambda: leaderworkerset(None),
    "lws-leader-ready": lambda: leaderworkerset("LeaderReady"),
    "rayjob": rayjob,
    "mpijob": lambda: mpijob(None),
    "mpijob-workers-first": lambda: mpijob("WaitForWorkersReady"),
}


def enforced(namespace: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace, "labels": {names.ENFORCE_LABEL: names.ENFORCE_VALUE}}}


# --- what the API served, watched --------------------------------------------------------------

WATCHED = {PODS: "/api/v1/pods", GANGS: f"/apis/{names.GANG_GROUP}/{names.GANG_VERSION}/{GANGS}",
           NODES: "/api/v1/nodes"}
WATCH_LIST = "?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"


class Recording:
    """Every change to pods, Gangs and nodes, each watched over HTTPS as a client watches them: a
    watch-list (every object as ADDED, a bookmark ending them, then every change and a bookmark
    when nothing changed for a while). One resourceVersion counts every change the API server
    commits, so the three are merged in its order, and a watch has delivered every change of its
    kind up to the last resourceVersion it sent (`caught_up`)."""

    def __init__(self, kubeconfig: Path):
        config = json.loads(kubeconfig.read_text())
        cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
        self._address = cluster["server"].removeprefix("https://").rsplit(":", 1)
        self._context = ssl.create_default_context(
            cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
        self._token = user["token"]
        self.changes: list[tuple[int, str, str, dict, float]] = []  # (rv, resource, type, object, seen at)
        self.caught_up: dict[str, int] = {}
        self.broken: dict[str, str] = {}
        self._changed = threading.Condition()
        for resource, path in WATCHED.items():
            threading.Thread(target=self._watch, args=(resource, path), daemon=True).start()
        self.wait_caught_up(0)

    def _watch(self, resource: str, path: str) -> None:
        host, port = self._address
        connection = http.client.HTTPSConnection(host, int(port), context=self._context)
        try:
            connection.request("GET", path + WATCH_LIST, headers={"Authorization": f"Bearer {self._token}"})
            response = connection.getresponse()
            listed = False
            for line in iter(response.readline, b""):
                event = json.loads(line)
                rv = int(event["object"]["metadata"]["resourceVersion"])
                with self._changed:
                    if event["type"] != "BOOKMARK":
                        self.changes.append((rv, resource, event["type"], event["object"], time.monotonic()))
                    listed = listed or event["type"] == "BOOKMARK"
                    if listed:
                        self.caught_up[resource] = max(rv, self.caught_up.get(resource, 0))
                    self._changed.notify_all()
        except (OSError, http.client.HTTPException, ValueError) as error:
            with self._changed:
                self.broken[resource] = repr(error)
                self._changed.notify_all()

    def wait_caught_up(self, rv: int) -> None:
        """Until every watch has delivered every change up to resourceVersion `rv`."""
        with self._changed:
            done = self._changed.wait_for(lambda: self.broken or (
                len(self.caught_up) == len(WATCHED) and min(self.caught_up.values()) >= rv), CAUGHT_UP_SECONDS)
            assert done and not self.broken, f"watches caught up to {self.caught_up}, wanted {rv}: {self.broken}"

    def replay(self, checker: Checker, up_to: int) -> Checker:
        """`checker` given every recorded change up to resourceVersion `up_to`, in the server's order."""
        with self._changed:
            changes = sorted(change for change in self.changes if change[0] <= up_to)
        now = 0.0
        for _, resource, kind, obj, seen in changes:
            now = max(now, seen)
            checker.observe(resource, kind, obj, now)
        checker.finish(now)
        return checker

    def gangs(self, namespace: str) -> dict[str, dict]:
        """Every Gang of `namespace` as last seen."""
        with self._changed:
            return {obj["metadata"]["name"]: obj for _, resource, _, obj, _ in sorted(self.changes)
                    if resource == GANGS and obj["metadata"].get("namespace") == namespace}

    def pods(self, namespace: str) -> dict[str, dict]:
        """Every pod of `namespace` as last seen, those deleted since included."""
        with self._changed:
            return {obj["metadata"]["name"]: obj for _, resource, _, obj, _ in sorted(self.changes)
                    if resource == PODS and obj["metadata"].get("namespace") == namespace}

    def reserved_together(self, namespace: str) -> set[frozenset[str]]:
        """The sets of pods each Gang of `namespace` reserved, over its whole life."""
        reserved: dict[str, set[str]] = {}
        with self._changed:
            for _, resource, _, obj, _ in self.changes:
                if resource == GANGS and obj["metadata"].get("namespace") == namespace:
                    reserved.setdefault(obj["metadata"]["name"], set()).update(
                        (obj.get("status") or {}).get("reservations") or {})
        return {frozenset(pods) for pods in reserved.values() if pods}


@dataclass(frozen=True)
class Finished:
    """An example that finished: its namespace, its pods by name, and the resourceVersion they were
    listed at, up to which the recording holds every change."""

    namespace: str
    pods: dict[str, dict]
    listed_at: int


class Playground:
    """The served playground, its kubeconfig and the recording of what it served."""

    def __init__(self, kubeconfig: Path, recording: Recording):
        self.kubeconfig, self.recording = kubeconfig, recording

    def kubectl(self, *args: str) -> str:
        command = [str(KUBECTL), "--kubeconfig", str(self.kubeconfig), *args]
        result = subprocess.run(command, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, f"{shlex.join(command[3:])}: {result.stderr}"
        return result.stdout

    def apply(self, namespace: str, manifests: list[dict]) -> None:
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as file:
            yaml.safe_dump_all([enforced(namespace), *manifests], file)
            file.flush()
            self.kubectl("apply", "-n", namespace, "-f", file.name)

    def finished(self, namespace: str, owner: str, condition: str) -> Finished:
        """Wait for `owner` to meet `condition` (`kubectl wait --for`), then list the namespace's pods
        and wait until the recording holds every change up to that list."""
        self.kubectl("wait", f"--for={condition}", owner, "-n", namespace, f"--timeout={WAIT}")
        listed = json.loads(self.kubectl("get", "--raw", f"/api/v1/namespaces/{namespace}/pods"))  # the server's list
        listed_at = int(listed["metadata"]["resourceVersion"])
        self.recording.wait_caught_up(listed_at)
        return Finished(namespace, {pod["metadata"]["name"]: pod for pod in listed["items"]}, listed_at)

    def get(self, namespace: str, owner: str) -> dict:
        return json.loads(self.kubectl("get", owner, "-n", namespace, "-o", "json"))


@pytest.fixture(scope="module")
def playground(tmp_path_factory):
    directory = tmp_path_factory.mktemp("shipped-examples")
    served = Served(directory, "--port", str(free_port()), "--nodes", str(GPU_NODES), "--run-seconds",
                    str(RUN_SECONDS), "--work-dir", str(directory / "work"))
    try:
        kubeconfig = Path(line_after(served.banner(), "kubeconfig:"))
        running = Playground(kubeconfig, Recording(kubeconfig))
        for namespace, manifests in EXAMPLES.items():
            running.apply(namespace, manifests())
        yield running
    finally:
        assert served.stop() == 0, served.stderr_path.read_text()


# --- what the tests assert ----------------------------------------------------------------------

def labels(pod: Mapping) -> dict:
    return pod["metadata"].get("labels") or {}


def named(pods: Mapping[str, dict], label: str, value: str) -> set[str]:
    return {name for name, pod in pods.items() if labels(pod).get(label) == value}


def replicated_job(pod: Mapping) -> str:
    return labels(pod).get(names.JOBSET_REPLICATED_JOB_LABEL, "")


def assert_released_whole(recording: Recording, finished: Finished, gangs: set[frozenset[str]], *,
                          size_of: Callable[[Mapping], int], group_of: Callable[[Mapping], str] = group_label) -> None:
    """Each of `gangs` was what one Gang reserved, its pods labelled with the group the Gang declares;
    replayed through the invariant checker, every gang of the namespace was placed whole before its
    first member was bound, released only once all of it was reserved, and held no GPU while
    partly placed, and one of them held GPUs (the promise was put to the test). `group_of` and
    `size_of` tell the checker the example's gangs (a staged owner's pods share one group label, a
    gang per stage); pods of other namespaces are in no group for it but count on their nodes."""
    namespace = finished.namespace
    assert recording.reserved_together(namespace) == gangs
    group_labels = {name: labels(pod).get(names.GROUP_LABEL) for name, pod in finished.pods.items()}
    for gang in recording.gangs(namespace).values():
        reserved = (gang.get("status") or {}).get("reservations") or {}
        assert {group_labels.get(name) for name in reserved} <= {gang["spec"]["groupName"]}, gang["metadata"]

    def here(pod: Mapping) -> bool:
        return pod["metadata"].get("namespace") == namespace

    checker = recording.replay(Checker(
        bind_timeout=BIND_TIMEOUT, reaction=RESYNC, size_of=lambda pod: size_of(pod) if here(pod) else None,
        group_of=lambda pod: group_of(pod) if here(pod) else ""), finished.listed_at)
    assert checker.violations_in(namespace) == []
    first_bound = {group: counts for (where, group), counts in checker.first_bound.items() if where == namespace}
    assert sorted(first_bound.values()) == sorted((len(gang), len(gang)) for gang in gangs), \
        "each gang's first member bound only once all of it was placed"
    assert any(where == namespace for where, _ in checker.held_during), "a gang of it held GPUs"


def phases(pods: Mapping[str, dict]) -> set[str]:
    return {pod["status"]["phase"] for pod in pods.values()}


# --- the examples -------------------------------------------------------------------------------

def test_a_trainjob_on_the_torch_distributed_runtime_completes_its_nodes_one_gang(playground):
    finished = playground.finished("trainer-torch", "trainjob/dist", "condition=Complete")
    pods = finished.pods
    assert len(pods) == 2 and phases(pods) == {"Succeeded"}
    assert_released_whole(playground.recording, finished, {frozenset(pods)}, size_of=lambda pod: 2)


@pytest.mark.parametrize("namespace", ["trainer-torchtune", "trainer-torchtune-at-once"],
                         ids=["staged", "without-depends-on"])
def test_a_trainjob_on_the_torchtune_runtime_leaves_its_initializers_alone_and_gangs_its_nodes(playground,
                                                                                                namespace):
    finished = playground.finished(namespace, "trainjob/tune", "condition=Complete")
    pods = finished.pods
    initializers = {name for name, pod in pods.items() if replicated_job(pod) in names.TRAINER_INITIALIZER_STEPS}
    nodes = named(pods, names.JOBSET_REPLICATED_JOB_LABEL, "node")
    assert len(initializers) == 2 and len(nodes) == 2 and phases(pods) == {"Succeeded"}
    assert not any(names.GROUP_LABEL in labels(pods[name]) for name in initializers), "left alone"
    assert_released_whole(playground.recording, finished, {frozenset(nodes)}, size_of=lambda pod: 2)


def test_the_jobset_depends_on_example_completes_each_stage_a_gang_of_its_own(playground):
    finished = playground.finished("jobset-staged", "jobset/depends-on", "condition=Completed")
    pods = finished.pods
    stages = {job: named(pods, names.JOBSET_REPLICATED_JOB_LABEL, job) for job in ("initializer", "launcher", "worker")}
    assert [len(members) for members in stages.values()] == [1, 1, 4] and phases(pods) == {"Succeeded"}
    assert len({labels(pod).get(names.GROUP_LABEL) for pod in pods.values()}) == 1, "one group label, a stage a gang"
    sizes = {job: len(members) for job, members in stages.items()}
    assert_released_whole(playground.recording, finished, {frozenset(members) for members in stages.values()},
                          size_of=lambda pod: sizes[replicated_job(pod)],
                          group_of=lambda pod: f"{group_label(pod)}/{replicated_job(pod)}")


def test_the_jobset_without_depends_on_completes_as_one_gang(playground):
    finished = playground.finished("jobset-at-once", "jobset/depends-on", "condition=Completed")
    pods = finished.pods
    assert len(pods) == 6 and phases(pods) == {"Succeeded"}
    assert_released_whole(playground.recording, finished, {frozenset(pods)}, size_of=lambda pod: 6)


LWS = "leaderworkerset-sample"
LWS_GROUPS = [{f"{LWS}-{group}", *(f"{LWS}-{group}-{worker}" for worker in (1, 2, 3))} for group in (0, 1)]


def test_an_lws_started_leader_created_serves_each_replica_group_one_gang(playground):
    finished = playground.finished("lws-leader-created", f"leaderworkerset/{LWS}", "condition=Available")
    pods = finished.pods
    assert set(pods) == set().union(*LWS_GROUPS) and phases(pods) == {"Running"}
    assert_released_whole(playground.recording, finished, {frozenset(group) for group in LWS_GROUPS},
                          size_of=lambda pod: 4)


def test_an_lws_started_leader_ready_serves_each_leader_alone_and_its_workers_one_gang(playground):
    finished = playground.finished("lws-leader-ready", f"leaderworkerset/{LWS}", "condition=Available")
    pods = finished.pods
    assert set(pods) == set().union(*LWS_GROUPS) and phases(pods) == {"Running"}
    leaders = {f"{LWS}-0", f"{LWS}-1"}

    def part(pod: Mapping) -> str:
        return f"{group_label(pod)}/{'leader' if pod['metadata']['name'] in leaders else 'workers'}"

    assert_released_whole(playground.recording, finished,
                          {frozenset({leader}) for leader in leaders} | {frozenset(g - leaders) for g in LWS_GROUPS},
                          size_of=lambda pod: 1 if pod["metadata"]["name"] in leaders else 3, group_of=part)


def test_the_rayjob_completes_its_head_and_worker_one_gang_its_submitter_left_alone(playground):
    finished = playground.finished("rayjob", "rayjob/rayjob-sample", "jsonpath={.status.jobStatus}=SUCCEEDED")
    pods = finished.pods
    assert playground.get("rayjob", "rayjob/rayjob-sample")["status"]["jobDeploymentStatus"] == "Complete"
    cluster = {name for name, pod in pods.items() if names.RAY_NODE_TYPE_LABEL in labels(pod)}
    [submitter] = set(pods) - cluster
    assert len(cluster) == 2 and phases({name: pods[name] for name in cluster}) == {"Running"}, "they serve on"
    assert pods[submitter]["status"]["phase"] == "Succeeded" and names.GROUP_LABEL not in labels(pods[submitter])
    assert_released_whole(playground.recording, finished, {frozenset(cluster)}, size_of=lambda pod: 2)



def role(pod: Mapping) -> str:
    return labels(pod).get(names.KUBEFLOW_JOB_ROLE_LABEL, "")


@pytest.mark.parametrize("namespace", ["mpijob", "mpijob-workers-first"], ids=["at-startup", "wait-for-workers-ready"])
def test_the_mpijob_completes_its_launcher_and_workers_placed_whole(playground, namespace):
    finished = playground.finished(namespace, "mpijob/pi", "condition=Succeeded")
    finished = replace(finished, pods=playground.recording.pods(namespace))  # cleanPodPolicy deleted the workers
    pods = finished.pods
    launcher, workers = named(pods, names.KUBEFLOW_JOB_ROLE_LABEL, "launcher"), named(
        pods, names.KUBEFLOW_JOB_ROLE_LABEL, "worker")
    assert len(launcher) == 1 and len(workers) == 2 and len(pods) == 3
    assert {pods[name]["status"]["phase"] for name in launcher} == {"Succeeded"}
    if namespace == "mpijob":
        assert_released_whole(playground.recording, finished, {frozenset(pods)}, size_of=lambda pod: 3)
    else:  # the launcher is created once the workers are ready: they are a gang, it follows alone
        assert_released_whole(playground.recording, finished, {frozenset(workers), frozenset(launcher)},
                              size_of=lambda pod: 2 if role(pod) == "worker" else 1,
                              group_of=lambda pod: f"{group_label(pod)}/{role(pod)}")
