"""The store, planner, priorities, autoscaling and binding sections at toy sizes: they run, and their tables carry
the figures."""

import pytest

from bench import planner as bench_planner
from bench import store as bench_store
from bench.cli import SECTIONS, measured_section, merge
from reliability import binding
from reliability.report import binding_markdown
from study import autoscaling, autoscaling_report, priorities, priority_report
from study.run import Cluster


def test_the_store_section_reports_every_list_it_timed():
    figures = bench_store.run(nodes=20, pods=200)
    text = bench_store.markdown(figures)
    assert text.startswith("## Cluster emulation: 20 nodes and 200 pods in memory")
    for row in ("list all pods (no copies)", "list by spec.nodeName", "store memory (tracemalloc)"):
        assert f"| {row} | " in text
    assert f"| list one namespace | {figures['list_namespace_ms']} ms |" in text


def test_the_planner_section_has_one_row_per_cluster_size_in_each_table():
    figures = bench_planner.run(nodes=(32, 64), bound_pods=100, waiting_groups=10)
    tables = [block for block in bench_planner.markdown(figures).split("\n\n") if block.startswith("| nodes")]
    assert len(tables) == 3, "the plain pass, then the pass with topology rules, then with trees of groups"
    for table in tables:
        rows = [line for line in table.splitlines() if "---" not in line]
        assert [row.split(" | ")[0] for row in rows[1:]] == ["| 32", "| 64"]


@pytest.mark.slow
def test_the_priorities_section_renders_one_row_per_policy_between_its_markers():
    results = priorities.run(jobs=12, seed=5, cluster=Cluster(nodes=4), horizon=4 * 3600)
    body = priority_report.markdown(results)
    assert body.startswith("## Priority mix: 20% of the jobs at high priority, load 0.9")
    rows = [line for line in body.splitlines() if line.startswith("| ") and "---" not in line]
    assert [row.split(" | ")[0] for row in rows[1:]] == [
        "| stock scheduler", "| quota-only gate", "| gangkeeper (preemption on)", "| gangkeeper (preemption off)"]
    assert "Which policy does best" in body and "Checks:" in body
    assert "- gangkeeper (preemption on), replayed a second time from the same trace: " in body
    assert "priorities" in SECTIONS
    written = merge("", {"priorities": measured_section("priorities", body, "gangkeeper bench priorities",
                                                        (0.5, 0.5, 0.5))})
    assert "<!-- section: priorities -->\n" in written and written.rstrip().endswith("<!-- /section: priorities -->")


def test_the_autoscaling_section_renders_one_row_per_policy_between_its_markers():
    results = autoscaling.run(jobs=12, seed=5, cluster=Cluster(nodes=2), pool=autoscaling.Pool(max_nodes=4),
                              horizon=2 * 3600)
    body = autoscaling_report.markdown(results)
    rows = [line for line in body.splitlines() if line.startswith("| ") and "---" not in line]
    assert [row.split(" | ")[0] for row in rows[1:]] == [
        "| stock scheduler", "| gangkeeper, `None` (no provisioning)", "| gangkeeper, `ProvisioningRequest`",
        "| gangkeeper, `Placeholders`"]
    assert "Checks (gangkeeper's invariants" in body and "Reproduce: `gangkeeper bench autoscaling`" in body
    assert list(SECTIONS)[list(SECTIONS).index("topology") + 1] == "autoscaling"
    written = merge("", {"autoscaling": measured_section("autoscaling", body, "gangkeeper bench autoscaling",
                                                         (0.5, 0.5, 0.5))})
    assert "<!-- section: autoscaling -->\n" in written and written.rstrip().endswith("<!-- /section: autoscaling -->")


def test_the_binding_section_renders_both_sides_per_size_and_the_differences_against_the_goals():
    groups = [binding.Group(size, side, f"{side[0]}{size}-{n:03d}", 1.0, size if side == binding.GANGKEEPER else 0,
                            size, ms,
                            *((ms / 4, ms / 3, ms / 2, ms + 1) if side == binding.GANGKEEPER else ()))
              for size in (16, 256) for n in range(20)
              for side, ms in ((binding.GANGKEEPER, float(size + n)), (binding.BARE, n / 10))]
    result = binding.Result(binding.Binding(), groups, seconds=12.0, load_average=(1.0, 0.5, 0.25))
    body = binding_markdown(result)
    assert body.startswith("## Complete → bound: groups of 16 and 256 members, gangkeeper against the bare scheduler")
    assert "| 16 | gangkeeper | 20 / 20 | 26.0 / **35.0** / 35.0 | 1.0 |" in body
    assert "| 256 | bare | 20 / 20 | 1.0 / **1.9** / 1.9 | 1.0 |" in body
    assert "| 16 | +25.0 | **+33.1** | +30 ms | **no** |" in body
    assert "| 256 | +265.0 | **+273.1** | +200 ms | **no** |" in body
    assert "| 256 | 66.5 / 68.8 | 88.7 / 91.7 | 133.0 / 137.5 | 266.0 / 275.0 | 20, 266.5, 267.0 / 276.0 |" in body
    assert list(SECTIONS)[list(SECTIONS).index("load") + 1] == "binding"
