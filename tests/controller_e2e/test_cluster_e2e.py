"""Whole workloads on the emulated cluster: operators create pods, the real webhook gates them, the
controller (over HTTP) reserves and releases, the emulated kube-scheduler binds, kubelets run them to
completion — while `sim.invariants` checks every change the API server commits."""

import copy

import pytest

from gangkeeper import names
from gangkeeper.controller.cache.groups import PODGROUPS_NATIVE
from sim.clock import RealClock
from sim.cluster import ThreadRunner, emulated_cluster
from sim.spec import load, node_manifests, submissions
from tests.controller_e2e.emulation import NS, Emulation, eventually, invariants

pytestmark = pytest.mark.e2e

SIX_KINDS = f"""
nodes: [{{count: 6, gpusPerNode: 8}}]
workloads:
  - {{kind: PyTorchJob, name: pt, namespace: {NS}, size: 4, gpusPerPod: 2, durationSeconds: 1}}
  - {{kind: JobSet, name: js, namespace: {NS}, size: 4, podsPerJob: 2, gpusPerPod: 2, durationSeconds: 1}}
  - {{kind: Job, name: ij, namespace: {NS}, size: 4, gpusPerPod: 2, durationSeconds: 1}}
  - {{kind: Pod, name: plain, namespace: {NS}, size: 4, gpusPerPod: 2, durationSeconds: 1}}
  - {{kind: Pod, name: gx, namespace: {NS}, size: 4, gpusPerPod: 2, durationSeconds: 1}}
  - {{kind: Pod, name: npg, namespace: {NS}, size: 4, gpusPerPod: 2, durationSeconds: 1}}
"""

TWO_JOBS_ON_48_GPUS = f"""
nodes: [{{count: 6, gpusPerNode: 8}}]
workloads:
  - {{kind: PyTorchJob, name: a, namespace: {NS}, size: 32, durationSeconds: 0.5}}
  - {{kind: PyTorchJob, name: b, namespace: {NS}, size: 32, durationSeconds: 0.5}}
"""


FRAGMENTED = f"""
nodes: [{{count: 4, gpusPerNode: 8}}]
workloads:
  - {{kind: PyTorchJob, name: big, namespace: {NS}, size: 2, gpusPerPod: 8, durationSeconds: 1}}
  - {{kind: PyTorchJob, name: small, namespace: {NS}, size: 4, gpusPerPod: 2, durationSeconds: 1}}
"""


def declared_elsewhere(resource: str, manifest: dict) -> dict:
    """Pods `gx` declare their size with a Gang, pods `npg` join a native PodGroup by its label."""
    if resource != "pods" or manifest["metadata"]["labels"][names.GROUP_LABEL] not in ("gx", "npg"):
        return manifest
    manifest = copy.deepcopy(manifest)
    metadata = manifest["metadata"]
    del metadata["annotations"][names.MIN_COUNT_ANNOTATION]
    if metadata["labels"][names.GROUP_LABEL] == "npg":
        metadata["labels"] = {names.NATIVE_POD_GROUP_LABEL: "npg"}
    return manifest


@pytest.fixture()
def cluster(tmp_path):
    """An emulation whose scheduler, kubelets and operators run on a thread in real time."""
    started = []

    def start(spec_text: str, min_count, **api_options):
        emulation = Emulation(tmp_path, **api_options)
        spec = load(spec_text)
        for manifest in node_manifests(spec):
            emulation.api.create("nodes", manifest)
        watch = invariants(emulation, min_count)
        runner = ThreadRunner(emulated_cluster(emulation.api, RealClock(), start_delay=0.1), idle_wait=0.05).start()
        started.append((emulation, watch, runner))
        return emulation, watch, spec

    yield start
    for emulation, watch, runner in started:
        runner.stop()
        watch.close()
        emulation.close()


def submit(emulation: Emulation, spec: dict) -> None:
    for submission in submissions(spec):
        manifest = declared_elsewhere(submission.resource, submission.manifest)
        emulation.api.create(submission.resource, manifest, namespace=NS)


def phases(emulation: Emulation) -> dict[str, str]:
    return {name: pod["status"]["phase"] for name, pod in emulation.pods().items()}


def test_every_kind_of_group_runs_whole_to_completion(cluster):
    emulation, watch, spec = cluster(SIX_KINDS, min_count=4, native_pod_groups=True)
    emulation.api.create("gangs", {"apiVersion": "gangkeeper.io/v1alpha1", "kind": "Gang",
                                               "metadata": {"name": "gx"}, "spec": {"minCount": 4}}, namespace=NS)
    emulation.api.create(PODGROUPS_NATIVE, {
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "npg"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}}}, namespace=NS)
    controller, audit = emulation.controller(consistency_seconds=0.3)  # rebuilt and compared, again and again
    submit(emulation, spec)
    eventually(lambda: len(phases(emulation)) == 24 and set(phases(emulation).values()) == {"Succeeded"},
               timeout=30, what="all 24 pods of the six workloads succeeded")
    assert watch.violations() == []
    sources = {pod["metadata"]["annotations"][names.GROUP_SOURCE_ANNOTATION] for pod in emulation.pods().values()}
    assert sources == {names.SOURCE_PYTORCHJOB, names.SOURCE_JOBSET, names.SOURCE_JOB, names.SOURCE_EXPLICIT,
                       names.SOURCE_NATIVE_POD_GROUP}
    def finished_gangs():
        gangs = emulation.api.list("gangs", namespace=NS)
        return len(gangs) == 6 and all((g.get("status") or {}).get("phase") == "Succeeded" for g in gangs) and gangs

    gangs = eventually(finished_gangs, what="six Gangs Succeeded")
    assert {g["status"]["minCount"] for g in gangs} == {4}
    assert audit.events().count("gang.reserved") == 6 and audit.events().count("gang.released") == 6
    assert controller.metrics.registry.get_sample_value("gangkeeper_index_inconsistencies_total") == 0


def test_two_32_gpu_jobs_on_48_gpus_both_finish_one_after_the_other(cluster):
    emulation, watch, spec = cluster(TWO_JOBS_ON_48_GPUS, min_count=32)
    emulation.controller()
    submit(emulation, spec)
    eventually(lambda: len(phases(emulation)) == 64 and set(phases(emulation).values()) == {"Succeeded"},
               timeout=40, what="both jobs succeeded")
    assert watch.violations() == []
    first, second = sorted(watch.checker.held_during.values())
    assert first[1] < second[0], "the second job held no GPU before the first had finished"
    for job in ("a", "b"):
        eventually(lambda: any(c["type"] == "Succeeded" and c["status"] == "True" for c in (
            emulation.api.get("pytorchjobs", job, namespace=NS).get("status") or {}).get("conditions") or ()),
            what=f"PyTorchJob {job} Succeeded")


def test_small_groups_fill_fragments_so_a_whole_node_job_runs_beside_them(cluster):
    emulation, watch, spec = cluster(FRAGMENTED, min_count=lambda group: 2 if group.startswith("big") else 4)
    for node_name in ("node-0", "node-1"):  # half of two nodes is taken by a service outside any gang
        emulation.api.create("pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"service-{node_name}"},
            "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "svc",
                                                            "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}},
            namespace="other")
    emulation.controller()
    submit(emulation, spec)
    eventually(lambda: len(phases(emulation)) == 6 and set(phases(emulation).values()) == {"Succeeded"},
               timeout=20, what="both jobs succeeded")
    assert watch.violations() == []
    placed = {name: pod["spec"]["nodeName"] for name, pod in emulation.pods().items()}
    assert {placed[n] for n in placed if n.startswith("small")} == {"node-0", "node-1"}, "into the fragments"
    assert {placed[n] for n in placed if n.startswith("big")} == {"node-2", "node-3"}
    big, small = (watch.checker.held_during[g] for g in sorted(watch.checker.held_during))
    assert big[0] <= small[1] and small[0] <= big[1], "both ran at the same time"
