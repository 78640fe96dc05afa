"""The cluster components on the emulated API server (sim.apiserver): the deadlock holds where
every write goes through defaulting, the pod rules and watch."""

from collections import Counter

from gangkeeper.names import KUBEFLOW_JOB_NAME_LABEL
from sim.accounting import Accounting
from sim.cluster import emulated_cluster
from sim.spec import load

TWO_JOBS_ON_48_GPUS = """
nodes: [{count: 6, gpusPerNode: 8}]
workloads:
  - {kind: PyTorchJob, name: a, namespace: ml, size: 32, durationSeconds: 600}
  - {kind: PyTorchJob, name: b, namespace: ml, size: 32, durationSeconds: 600}
"""


def pods_of(api, job):
    return api.list("pods", namespace="ml", label_selector=f"{KUBEFLOW_JOB_NAME_LABEL}={job}")


def test_two_32_gpu_jobs_on_48_gpus_deadlock_without_gangkeeper(api, clock):
    cluster = emulated_cluster(api, clock, spec=load(TWO_JOBS_ON_48_GPUS))
    cluster.run_until(clock.now() + 24 * 3600)
    held = 0
    for job in ("a", "b"):
        pods = pods_of(api, job)
        bound = [p for p in pods if p["spec"].get("nodeName")]
        assert Counter(p["status"]["phase"] for p in bound) == {"Running": len(bound)}
        assert 0 < len(bound) < 32, "each job is partly placed"
        held += len(bound)
        conditions = api.get("pytorchjobs", job, namespace="ml").get("status", {}).get("conditions", [])
        assert "Succeeded" not in {c["type"] for c in conditions}
    assert held == 48, "all 48 GPUs are held by the two incomplete jobs"
    assert cluster.next_due() is None, "nothing will ever change: a deadlock"
    summary = cluster.component(Accounting).summary(clock.now())
    assert summary["finished"] == 0

