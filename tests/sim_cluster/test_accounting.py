"""Accounting: job times, and GPU-seconds held usefully versus held waiting for the rest."""

import pytest

from sim.accounting import Accounting
from sim.names import DURATION_ANNOTATION

DEADLOCK = """
nodes: [{count: 6, gpusPerNode: 8}]
workloads:
  - {kind: PyTorchJob, name: a, size: 32, durationSeconds: 600}
  - {kind: PyTorchJob, name: b, size: 32, durationSeconds: 600}
"""


def test_partial_placement_holds_every_gpu_in_waste(make_cluster, clock):
    cluster = make_cluster(DEADLOCK)
    start = clock.now()
    cluster.run_until(start + 3600)
    summary = cluster.component(Accounting).summary(clock.now())
    assert summary["jobs"] == 2 and summary["started"] == 0 and summary["finished"] == 0
    assert summary["useful_gpu_seconds"] == 0
    assert summary["waiting_gpu_seconds"] == 48 * 3600
    assert summary["waste_fraction"] == 1.0


def test_a_job_that_fits_is_timed_and_its_gpu_seconds_are_useful(make_cluster, clock):
    cluster = make_cluster("""
nodes: [{count: 1, gpusPerNode: 8}]
workloads:
  - {kind: PyTorchJob, name: a, namespace: ml, size: 4, gpusPerPod: 2, durationSeconds: 100, submitSeconds: 10}
""", start_delay=2.0)
    start = clock.now()
    assert cluster.run_until_idle(start + 3600)
    [row] = cluster.component(Accounting).jobs(clock.now())
    assert row["job"] == "PyTorchJob ml/a"
    assert (row["submitted"] - start, row["started"] - start, row["finished"] - start) == (10, 12, 112)
    assert row["useful_gpu_seconds"] == 8 * 100
    assert row["waiting_gpu_seconds"] == 8 * 2  # bound for the start delay before all ran
    summary = cluster.component(Accounting).summary(clock.now())
    assert summary["mean_wait_seconds"] == 2 and summary["mean_completion_seconds"] == 102
    assert summary["makespan_seconds"] == 102
    assert summary["waste_fraction"] == pytest.approx(16 / 816)


def test_a_job_that_runs_in_stages_is_timed_from_its_first_start_to_its_last_end(make_cluster, api, clock):
    """Two pods at a time for four completions: the second pair runs once the first has finished."""
    cluster = make_cluster("nodes: [{count: 1, gpusPerNode: 8}]", start_delay=2.0)
    start = clock.now()
    template = {"metadata": {"annotations": {DURATION_ANNOTATION: "10"}},
                "spec": {"restartPolicy": "Never", "containers": [
                    {"name": "trainer", "image": "img", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    api.create("jobs", {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "ml"},
                        "spec": {"parallelism": 2, "completions": 4, "completionMode": "Indexed",
                                 "template": template}})
    assert cluster.run_until_idle(start + 3600)
    assert api.get("jobs", "train", namespace="ml")["status"]["succeeded"] == 4
    [row] = cluster.component(Accounting).jobs(clock.now())
    assert row["job"] == "Job ml/train"
    assert (row["started"] - start, row["finished"] - start) == (2, 2 + 10 + 2 + 10)
    assert row["useful_gpu_seconds"] == 2 * (2 * 10)
    assert row["waiting_gpu_seconds"] == 2 * (2 * 2)  # each pair bound for the start delay
