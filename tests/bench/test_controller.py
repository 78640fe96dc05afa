"""The controller benchmark runs end to end on a tiny cluster (its figures are `gangkeeper bench`'s, never a test's)."""

import pytest

from bench import controller as bench_controller


@pytest.mark.slow
def test_the_benchmark_measures_every_figure_and_formats_them():
    figures = bench_controller.run(nodes=(16, 32), bound_pods=320, waiting_groups=12, latency_groups=6)
    assert list(figures) == ["nodes=16", "nodes=32"]
    small, large = figures.values()
    assert (small["bound_pods"], large["bound_pods"]) == (160, 320), "bound pods scale with the nodes"
    assert large["groups"] >= 12 and large["rss_after_mib"] > 0 and large["release_max_ms"] > 0
    assert large["restart_groups"] == large["groups"], "the restart decides every group the rebuilt index holds"
    assert large["restart_ms"] >= large["relist_ms"] + large["first_pass_ms"] - 0.1
    told = bench_controller.telling(waiting_pods=40, nodes=4)
    assert told["events"][:2] == [40, 0] and told["waiting_pods"] == 40, "every waiting pod told once, in one pass"
    table = bench_controller.markdown(figures, told)
    assert table.count("\n| ") == 5 and "| 32 | 320 |" in table and "| 40 | 40 × 1, then 0 | 1 |" in table


@pytest.mark.slow
def test_waiting_groups_may_follow_the_node_count():
    figures = bench_controller.run(nodes=(16, 32), bound_pods=320, waiting_groups={16: 3, 32: 6}, latency_groups=2)
    assert [row["waiting_groups"] for row in figures.values()] == [3, 6]
    assert set(bench_controller.SCALE["waiting_groups"]) == set(bench_controller.SCALE["nodes"])


@pytest.mark.slow
def test_the_large_section_measures_memory_per_node_and_per_pod_and_formats_it():
    figures = bench_controller.run(nodes=(32,), bound_pods=320, waiting_groups=4, latency_groups=2, compare_whole=False)
    held = bench_controller.memory(nodes=(16, 32), bound_pods=320, waiting_groups=4)
    row = figures["nodes=32"]
    assert row["relist_whole_ms"] is None and row["rss_peak_mib"] >= row["rss_after_mib"] > 0
    assert [(nodes, pods) for nodes, pods, _ in held["rows"]][:2] == [(16, 0), (32, 0)]
    assert held["rows"][2][:2] == (32, held["rows"][2][2]["pods_listed"]) and held["rows"][2][1] > 320
    assert held["rows"][2][2]["rss_check_peak_mib"] >= held["rows"][2][2]["rss_after_mib"] > 0
    text = bench_controller.large_markdown(figures, held)
    assert "| 32 | 320 | 4 |" in text and "| — |" in text and "MiB per 10,000 pods" in text
    assert set(bench_controller.LARGE["nodes"]) == {65_000} and bench_controller.LARGE["bound_pods"] == 650_000
