"""The occupancy section on a tiny cluster: both passes run, and its table carries their figures."""

from bench import occupancy as bench_occupancy
from bench.cli import SECTIONS


def test_the_occupancy_section_measures_both_passes_on_the_same_cluster_and_formats_them():
    figures = bench_occupancy.run(nodes=(32,), bound_pods=200, waiting_groups=10)
    assert list(figures) == ["nodes=32"]
    row = figures["nodes=32"]
    assert row["bound_pods"] == 200 and row["allocated_claims"] > 0
    assert row["dra_free_gpus"] == row["baseline_free_gpus"] > 0, "devices held as claims leave the same GPUs free"
    assert row["baseline_admitted"] + row["baseline_waiting"] == row["dra_admitted"] + row["dra_waiting"] == 10
    assert row["constrained_members"] >= 0.1 * row["waiting_members"]
    assert row["anti_affinity_groups"] >= 1 and row["cel_evaluations"] > 0
    assert row["dra_first_ms"] > 0 and row["ratio_first"] > 0 and row["ratio_second"] > 0
    table = bench_occupancy.markdown(figures)
    assert table.startswith("## Occupancy: the planning pass with DRA devices and pod constraints")
    assert f"| {row['dra_first_ms']} / {row['dra_second_ms']} | {row['ratio_first']} / {row['ratio_second']} |" in table
    assert table.count("\n| 32 | 200 / ") == 1


def test_gangkeeper_bench_runs_the_occupancy_section_after_the_planner():
    names = list(SECTIONS)
    assert names.index("occupancy") == names.index("planner") + 1
