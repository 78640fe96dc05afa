"""The controller benchmark runs end to end on a tiny cluster (its figures are `gangkeeper bench`'s, never a test's)."""

from bench import controller as bench_controller


def test_the_benchmark_measures_every_figure_and_formats_them():
    figures = bench_controller.run(nodes=(16, 32), bound_pods=320, waiting_groups=12, latency_groups=6)
    assert list(figures) == ["nodes=16", "nodes=32"]
    small, large = figures.values()
    assert (small["bound_pods"], large["bound_pods"]) == (160, 320), "bound pods scale with the nodes"
    assert large["groups"] >= 12 and large["rss_after_mib"] > 0 and large["release_max_ms"] > 0
    table = bench_controller.markdown(figures)
    assert table.count("\n| ") == 3 and "| 32 | 320 |" in table
