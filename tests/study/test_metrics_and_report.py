"""Figures from per-job rows, GPU-seconds split by kind, and targets judged from figures (pure)."""

import pytest

from sim.api import WatchEvent
from study.metrics import Holdings, percentile, summarise
from study.report import markdown, table, targets
from tests import builders


def test_percentile_is_nearest_rank():
    assert percentile([], 0.95) is None
    assert percentile([5.0], 0.95) == 5.0
    assert percentile(list(range(1, 101)), 0.95) == 95
    assert percentile([3, 1, 2], 0.5) == 2


def row(submitted, started=None, finished=None, partial=0.0, startup=0.0, useful=0.0, state="placed"):
    return dict(submitted=submitted, started=started, finished=finished, partial=partial, startup=startup,
                useful=useful, state=state)


def test_summarise_counts_unfinished_jobs_and_waste_and_times_the_rest():
    rows = [row(0, 10, 110, useful=100 * 3600), row(5, 25, 225, startup=7200),
            row(10, None, None, partial=3600 * 8, state="partial"), row(20, None, None, state="unplaced")]
    figures = summarise(rows, cluster_gpus=8, window=(0.0, 100.0), horizon=1000.0, useful_in_window=400.0)
    assert (figures["jobs"], figures["never_started"], figures["not_completed"], figures["stuck_partial"]) == (4, 2, 2, 1)
    assert figures["partial_gpu_hours"] == 8 and figures["startup_gpu_hours"] == 2 and figures["useful_gpu_hours"] == 100
    assert figures["utilisation"] == pytest.approx(400 / 800)
    assert figures["mean_delay_s"] == 15 and figures["p95_delay_s"] == 20
    assert figures["makespan_s"] == 225 and not figures["all_completed"]


def pod(name, *, node=None, phase="Pending", world=2, gpus=4):
    return builders.pod(name, labels={"training.kubeflow.org/job-name": "j"},
                        annotations={"sim.gangkeeper.io/world-size": str(world)}, node_name=node, phase=phase,
                        containers=[builders.container("c", requests={builders.GPU: str(gpus)})])


def test_holdings_split_gpu_seconds_into_partial_startup_and_useful():
    holdings = Holdings()
    holdings.observe(WatchEvent("ADDED", "pods", pod("a", node="n1")), 0)      # 1 of 2 bound: partial
    holdings.observe(WatchEvent("ADDED", "pods", pod("b")), 0)
    holdings.observe(WatchEvent("MODIFIED", "pods", pod("b", node="n2")), 10)  # both bound: start-up
    holdings.observe(WatchEvent("MODIFIED", "pods", pod("a", node="n1", phase="Running")), 12)
    holdings.observe(WatchEvent("MODIFIED", "pods", pod("b", node="n2", phase="Running")), 12)  # training
    [(key, figures)] = holdings.snapshot(20).items()
    assert key == "PyTorchJob ml/j"
    assert figures == {"partial": 4 * 10, "startup": 8 * 2, "useful": 8 * 8, "state": "placed"}


def results_with(util, partial=0.0, not_completed=0):
    runs = []
    for load in (0.7, 1.1):
        for policy, u in util[load].items():
            counters = {"wall_seconds": 1.0, "passes": 10, "controller_writes": 20, "failed_actions": 0,
                        "index_inconsistencies": 0, "webhook_requests": 5}
            runs.append({"load": load, "policy": policy, "offered_load": load, "counters": counters,
                         "figures": {"not_completed": not_completed if policy == "gangkeeper" else 0,
                                     "never_started": 0, "stuck_partial": 0,
                                     "partial_gpu_hours": partial if policy == "gangkeeper" else 5.0,
                                     "startup_gpu_hours": 0.1, "utilisation": u, "mean_delay_s": 30.0,
                                     "p95_delay_s": 100.0 if policy == "stock" else 90.0, "makespan_s": 7200.0,
                                     "all_completed": True}})
    setup = {"jobs": 10, "seed": 1, "loads": [0.7, 1.1], "drain_seconds": 3600.0, "cluster_gpus": 16,
             "cluster": {"nodes": 2, "gpus_per_node": 8, "cpu_per_gpu": 4, "memory_gi_per_gpu": 32},
             "sizes": [[1, 1.0]], "durations": {"median": 60.0, "sigma": 1.0, "low": 1.0, "high": 600.0}}
    return {"setup": setup, "runs": runs}


def test_targets_are_judged_from_the_figures_not_asserted():
    good = results_with({0.7: {"stock": 0.70, "quota": 0.68, "gangkeeper": 0.67},
                         1.1: {"stock": 0.80, "quota": 0.85, "gangkeeper": 0.90}})
    assert [met for _, met, _ in targets(good)] == [True, True, True, True]
    bad = results_with({0.7: {"stock": 0.70, "quota": 0.68, "gangkeeper": 0.60},
                        1.1: {"stock": 0.80, "quota": 0.85, "gangkeeper": 0.85}}, partial=1.0, not_completed=2)
    assert [met for _, met, _ in targets(bad)] == [False, False, False, False]


def test_the_markdown_has_a_row_per_policy_and_load_and_says_where_a_baseline_wins():
    results = results_with({0.7: {"stock": 0.70, "quota": 0.68, "gangkeeper": 0.67},
                            1.1: {"stock": 0.80, "quota": 0.85, "gangkeeper": 0.90}})
    assert table(results).count("\n") == 2 + 6 - 1
    text = markdown(results, {"waste": "study-waste.png"})
    assert "![waste](study-waste.png)" in text and "**not met**" not in text
    assert "mean delay: a tie between stock scheduler and quota-only gate and gangkeeper" in text
    assert "p95 delay: a tie between quota-only gate and gangkeeper" in text
