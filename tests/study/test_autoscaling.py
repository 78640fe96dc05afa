"""The autoscaled cluster: the trace, the nodes added and what of them stood idle, the figures and
their Markdown, and replays small enough that the answer is known. Virtual clock; no timed
assertions."""

import pytest

from gangkeeper import names
from sim.api import WatchEvent
from sim.spec import node_groups, node_manifests
from study import autoscaling
from study.autoscaling import LARGE_SIZES, SMALL_SIZES, Pool, draw_jobs, job_rows, replay_once, start_figures
from study.autoscaling_report import markdown, to_start
from study.metrics import AddedNodes
from study.run import Cluster, spec_for
from study.trace import Job
from tests import builders

TWO_NODES = Cluster(nodes=2)  # 16 GPUs: the 32-GPU job fits only on added nodes
POOL = Pool(max_nodes=4, provisioning_seconds=60.0)
# Two small jobs take the static nodes for the whole replay; the large one comes 10 s later.
SMALL = [Job("job-b", 0.0, 8, 3000.0), Job("job-c", 0.0, 8, 3000.0)]
LARGE = Job("job-a", 10.0, 32, 600.0)


def replay(policy: str) -> dict:
    return replay_once(policy, [*SMALL, LARGE], TWO_NODES, POOL, drain=3600.0)


def test_without_provisioning_the_large_job_never_starts_and_nothing_is_added():
    outcome = replay("gangkeeper")
    f = outcome["figures"]
    assert (f["large"]["never_started"], f["small"]["never_started"], f["small"]["jobs"]) == (1, 0, 2)
    assert f["large"]["p50_to_start_s"] is None and f["added"]["nodes"] == 0
    assert outcome["violations"] == {}


@pytest.mark.parametrize("policy", ["gangkeeper-provisioning-request", "gangkeeper-placeholders"])
def test_asking_for_capacity_brings_the_nodes_and_starts_the_large_job_whole(policy):
    outcome = replay(policy)
    f = outcome["figures"]
    assert (f["large"]["started"], f["large"]["completed"], f["small"]["started"]) == (1, 1, 2)
    assert POOL.provisioning_seconds <= f["large"]["p50_to_start_s"] <= POOL.provisioning_seconds + 60
    assert f["added"]["nodes"] == 4 and f["added"]["standing"] == 0, "added for it, removed once empty"
    assert f["partial_gpu_hours"] == 0 and outcome["violations"] == {}
    assert outcome["counters"]["capacity"]["asked"] == 1


def test_the_stock_scheduler_adds_nodes_for_the_pending_pods():
    f = replay("stock")["figures"]
    assert f["large"]["started"] == 1 and f["added"]["nodes"] == 4
    # The nodes stand empty once the job is done, until the autoscaler removes them (10 min unneeded).
    assert f["added"]["idle_gpu_hours"] >= 32 * 600 / 3600
    assert f["added"]["gpu_hours"] > f["added"]["idle_gpu_hours"] >= f["added"]["placeholder_gpu_hours"] == 0


def test_the_draw_has_its_share_of_large_jobs_from_the_seed():
    drawn = draw_jobs(50, 7, 0.2)
    large = [gpus for gpus in drawn.gpus if gpus in dict(LARGE_SIZES)]
    assert len(large) == 10 and set(drawn.gpus) <= set(dict(LARGE_SIZES)) | set(dict(SMALL_SIZES))
    assert draw_jobs(50, 7, 0.2) == drawn != draw_jobs(50, 8, 0.2)
    assert all(300.0 <= duration <= 4 * 3600.0 for duration in drawn.durations)
    with pytest.raises(ValueError, match="large_share must be within"):
        draw_jobs(10, 7, 1.5)


def test_a_job_is_large_when_the_static_nodes_cannot_hold_it():
    assert autoscaling.large(LARGE, TWO_NODES) and not autoscaling.large(Job("j", 0.0, 16, 60.0), TWO_NODES)


def test_the_scenario_has_the_static_nodes_and_an_empty_node_group_of_the_same_nodes():
    spec = spec_for([LARGE], TWO_NODES, node_groups=[POOL.node_group(TWO_NODES)])
    (group,) = node_groups(spec)
    assert (group.name, group.min_size, group.max_size, group.provisioning_seconds) == ("gpu-pool", 0, 4, 60.0)
    static = node_manifests(spec)
    assert len(static) == 2 and group.node("gpu-pool-0")["status"]["allocatable"] == static[0]["status"]["allocatable"]
    assert autoscaling.capacity(TWO_NODES, POOL) == 48


def test_start_figures_count_a_job_never_started_as_later_than_any_that_did():
    rows = [{"submitted": 0.0, "started": started, "finished": None if started is None else 500.0}
            for started in (10.0, 20.0, None, 40.0)]
    figures = start_figures(rows)
    assert (figures["jobs"], figures["started"], figures["never_started"], figures["completed"]) == (4, 3, 1, 3)
    assert figures["p50_to_start_s"] == 20.0
    assert figures["p95_to_start_s"] is None, "the rank falls on the job that never started"
    assert to_start(figures, "p95_to_start_s") == "not started" and to_start(figures, "p50_to_start_s") == "20 s"
    assert to_start(start_figures([]), "p50_to_start_s") == "—"


def test_job_rows_leave_placeholders_out_and_say_which_jobs_are_large():
    measured = [{"job": "PyTorchJob ml/job-a", "submitted": 0.0, "started": 100.0, "finished": 700.0, "partial": 5.0},
                {"job": "PyTorchJob ml/job-b", "submitted": 10.0, "started": 12.0, "finished": 312.0, "partial": 0.0},
                {"job": "Pod ml/gangkeeper-job-a-1-0", "submitted": 1.0, "started": 60.0, "finished": None,
                 "partial": 0.0}]
    rows = job_rows([LARGE, SMALL[0]], measured, TWO_NODES)
    assert [(row["job"], row["large"], row["partial"]) for row in rows] == [
        ("PyTorchJob ml/job-a", True, 5.0), ("PyTorchJob ml/job-b", False, 0.0)]


# --- the nodes added and their idle GPUs, on a hand-made timeline --------------------------------

def added_node(name: str) -> dict:
    (group,) = node_groups(spec_for([LARGE], TWO_NODES, node_groups=[POOL.node_group(TWO_NODES)]))
    return group.node(name)


def bound(name: str, node: str, gpus: int, *, phase: str = "Running", placeholder: bool = False) -> dict:
    labels = {names.CAPACITY_FOR_LABEL: "gang-uid"} if placeholder else {"training.kubeflow.org/job-name": "j"}
    return builders.pod(name, labels=labels, node_name=node, phase=phase, gpus=gpus)


def test_added_nodes_count_gpus_no_jobs_pod_requests_as_idle_placeholders_included():
    static = node_manifests(spec_for([LARGE], TWO_NODES))[0]
    nodes = AddedNodes()
    for moment, event in [
            (0.0, WatchEvent("ADDED", "nodes", static)),
            (0.0, WatchEvent("ADDED", "nodes", added_node("gpu-pool-0"))),
            (0.0, WatchEvent("ADDED", "pods", bound("on-static", static["metadata"]["name"], 8))),
            (50.0, WatchEvent("ADDED", "pods", bound("placeholder", "gpu-pool-0", 4, placeholder=True))),
            (100.0, WatchEvent("DELETED", "pods", bound("placeholder", "gpu-pool-0", 4, placeholder=True))),
            (100.0, WatchEvent("ADDED", "pods", bound("worker", "gpu-pool-0", 6))),
            (400.0, WatchEvent("MODIFIED", "pods", bound("worker", "gpu-pool-0", 6, phase="Succeeded"))),
            (1000.0, WatchEvent("DELETED", "nodes", added_node("gpu-pool-0"))),
            (1100.0, WatchEvent("ADDED", "nodes", added_node("gpu-pool-0")))]:  # the name again: another node
        nodes.observe(event, moment)
    figures = nodes.snapshot(1200.0)
    assert (figures["nodes"], figures["peak"], figures["standing"]) == (2, 1, 1)
    assert figures["gpu_hours"] == pytest.approx(8 * 1100 / 3600)
    # idle: 8 GPUs for 0–100 s (a placeholder's 4 of them count as idle), 2 for 100–400 s, 8 from
    # 400 s until the node goes at 1000 s, and 8 on the new node for its 100 s.
    assert figures["idle_gpu_hours"] == pytest.approx((8 * 100 + 2 * 300 + 8 * 600 + 8 * 100) / 3600)
    assert figures["placeholder_gpu_hours"] == pytest.approx(4 * 50 / 3600)


def test_a_pod_being_deleted_still_holds_its_gpus_and_a_pod_on_a_removed_node_holds_nothing_on_its_namesake():
    nodes = AddedNodes()
    deleting = bound("worker", "gpu-pool-0", 8)
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:10Z"
    for moment, event in [(0.0, WatchEvent("ADDED", "nodes", added_node("gpu-pool-0"))),
                          (0.0, WatchEvent("ADDED", "pods", bound("worker", "gpu-pool-0", 8))),
                          (10.0, WatchEvent("MODIFIED", "pods", deleting)),
                          (20.0, WatchEvent("DELETED", "nodes", added_node("gpu-pool-0"))),
                          (30.0, WatchEvent("ADDED", "nodes", added_node("gpu-pool-0"))),
                          (40.0, WatchEvent("DELETED", "pods", deleting))]:
        nodes.observe(event, moment)
    figures = nodes.snapshot(50.0)
    assert figures["idle_gpu_hours"] == pytest.approx(8 * 20 / 3600), "the first node busy for 20 s, the second idle"


def test_a_quick_run_and_its_markdown():
    results = autoscaling.run(jobs=12, seed=5, horizon=2 * 3600.0, cluster=TWO_NODES, pool=POOL,
                              policies_run=("stock", "gangkeeper", "gangkeeper-provisioning-request"))
    setup = results["setup"]
    assert setup["most_gpus"] == 48 and setup["large_jobs"] == round(0.2 * 12)
    for run in results["runs"]:
        assert run["figures"]["all"]["jobs"] == 12
    text = markdown(results)
    assert text.startswith("## Autoscaled cluster: large jobs that only new nodes can hold")
    rows = [line.split(" | ")[0] for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[1:] == ["| stock scheduler", "| gangkeeper, `None` (no provisioning)",
                        "| gangkeeper, `ProvisioningRequest`"]
    assert "- gangkeeper, `ProvisioningRequest`: no invariant broken; asks of the autoscaler" in text
    with pytest.raises(ValueError, match="are not among"):
        autoscaling.run(jobs=12, policies_run=("quota",))
