"""The store and planner sections at toy sizes: they run, and their tables carry the figures."""

from bench import planner as bench_planner
from bench import store as bench_store


def test_the_store_section_reports_every_list_it_timed():
    figures = bench_store.run(nodes=20, pods=200)
    text = bench_store.markdown(figures)
    assert text.startswith("## Cluster emulation: 20 nodes and 200 pods in memory")
    for row in ("list all pods (no copies)", "list by spec.nodeName", "store memory (tracemalloc)"):
        assert f"| {row} | " in text
    assert f"| list one namespace | {figures['list_namespace_ms']} ms |" in text


def test_the_planner_section_has_one_row_per_cluster_size():
    figures = bench_planner.run(nodes=(32, 64), bound_pods=100, waiting_groups=10)
    rows = [line for line in bench_planner.markdown(figures).splitlines() if line.startswith("| ") and "---" not in line]
    assert [row.split(" | ")[0] for row in rows[1:]] == ["| 32", "| 64"]
