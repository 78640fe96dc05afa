"""The topology run: the sample that declares a rule, the labelled scenario, where pods ran and the
figures made of it, and replays small enough that the answer is known. Virtual clock; no timed
assertions."""

import pytest

from gangkeeper import names
from gangkeeper.names import ZONE_LABEL
from sim.api import WatchEvent
from sim.spec import node_manifests, submissions
from study import topology, topology_report
from study.run import Cluster, spec_for
from study.topology import BLOCK_LABEL, Layout, Placements, declaring, job_rows, spanned, subset_figures
from study.trace import Job, draw, trace
from tests import builders

# Three blocks on one zone: node-0 alone, node-1 alone, node-2 and node-3 together. Only the last
# holds a 16-GPU job (2 workers of 8 GPUs) in one block.
UNEVEN_BLOCKS = [{"count": count, "labels": {ZONE_LABEL: "a"}, "topology": [{"label": BLOCK_LABEL, "nodes": count}]}
                 for count in (1, 1, 2)]
FOUR_NODES = Cluster(nodes=4)
FIRST = Job("job-a", 0.0, 16, 1000.0)  # takes the only block of two nodes, for 1000 s
SECOND = Job("job-b", 10.0, 16, 500.0)  # finds two free nodes, each a block of its own
PAIR = [FIRST, SECOND]


def replay(policy, sample):
    return topology.replay_once(policy, PAIR, FOUR_NODES, Layout(), sample, drain=3000.0, nodes=UNEVEN_BLOCKS)


@pytest.mark.slow
def test_a_job_that_requires_one_block_waits_for_it_and_one_that_does_not_spans_two():
    outcome = replay("gangkeeper-required", {"job-a"})
    t = outcome["topology"]
    assert (t["declaring"]["in_one_block"], t["declaring"]["placed"]) == (1, 1)
    assert (t["other_multi_node"]["in_one_block"], t["other_multi_node"]["placed"]) == (0, 1)
    assert t["multi_node"]["within_one_block"] == 0.5 and t["multi_node"]["mean_blocks"] == 1.5
    assert t["multi_node"]["within_one_zone"] == 1.0
    assert t["all"]["p95_delay_s"] < 30, "both start at once: job-b on the two single-node blocks"
    assert t["all"]["completed"] == 2 and outcome["figures"]["not_completed"] == 0


@pytest.mark.slow
def test_when_both_require_one_block_the_second_waits_for_the_first_to_finish():
    t = replay("gangkeeper-required", {"job-a", "job-b"})["topology"]
    assert (t["multi_node"]["in_one_block"], t["multi_node"]["placed"]) == (2, 2)
    # job-b (submitted at 10 s) starts once job-a (started ~2 s, trains 1000 s) is gone.
    assert 1000 - 10 <= t["declaring"]["p95_delay_s"] <= 1000 + 30
    assert t["declaring"]["mean_delay_s"] == pytest.approx((t["declaring"]["p95_delay_s"] + 2) / 2, abs=15)
    assert t["all"]["completed"] == 2 and t["multi_node"]["placed_again"] == 0


@pytest.mark.slow
def test_preferring_one_block_takes_it_when_it_fits_and_spans_two_rather_than_wait():
    t = replay("gangkeeper-preferred", {"job-a", "job-b"})["topology"]
    assert (t["multi_node"]["in_one_block"], t["multi_node"]["placed"]) == (1, 2)
    assert t["declaring"]["p95_delay_s"] < 30


@pytest.mark.slow
def test_without_a_rule_nobody_waits():
    for policy in ("gangkeeper", "stock"):
        t = replay(policy, {"job-a", "job-b"})["topology"]
        assert t["multi_node"]["placed"] == 2 and t["all"]["p95_delay_s"] < 30, policy


def test_the_sample_is_a_seeded_share_of_the_multi_node_jobs_that_fit_a_block():
    cluster, layout = Cluster(nodes=16), Layout(zone_nodes=16, block_nodes=4)  # blocks of 32 GPUs
    jobs = trace(draw(300, 7, cluster.gpus), 0.9, cluster.gpus)
    fitting = {job.name for job in jobs if 8 < job.gpus <= 32}
    sample = declaring(jobs, 0.5, 7, cluster, layout)
    assert sample <= fitting and len(sample) == round(0.5 * len(fitting))
    assert sample == declaring(jobs, 0.5, 7, cluster, layout) != declaring(jobs, 0.5, 8, cluster, layout)
    assert declaring(jobs, 1.0, 7, cluster, layout) == fitting and not declaring(jobs, 0.0, 7, cluster, layout)
    with pytest.raises(ValueError, match="share must be within"):
        declaring(jobs, 1.5, 7, cluster, layout)


def test_the_scenario_is_the_studys_with_labelled_nodes_and_the_rules_on_the_pod_templates():
    jobs, cluster = [FIRST, SECOND, Job("job-c", 20.0, 1, 60.0)], Cluster(nodes=16)
    assert topology.topology_spec(jobs, cluster) == spec_for(jobs, cluster)
    layout = Layout(zone_nodes=8, block_nodes=4)
    spec = topology.topology_spec(jobs, cluster, layout, topology.rules_for("gangkeeper-required", {"job-b"}, layout))
    labels = [node["metadata"]["labels"] for node in node_manifests(spec)]
    assert [node[ZONE_LABEL] for node in labels] == ["zone-0"] * 8 + ["zone-1"] * 8
    assert [node[BLOCK_LABEL] for node in labels[::4]] == [f"gce-topology-block-{i}" for i in range(4)]
    topologies = {workload["name"]: workload["topology"] for workload in spec["workloads"]}
    assert topologies["job-b"]["required"] == BLOCK_LABEL and topologies["job-a"] is None
    assert topology.rules_for("gangkeeper", {"job-b"}, layout) == {}
    assert topology.rules_for("gangkeeper-preferred", {"job-b"}, layout) == {"job-b": {"preferred": BLOCK_LABEL}}
    manifests = {s.manifest["metadata"]["name"]: s.manifest for s in submissions(spec)}
    assert f"'{names.TOPOLOGY_REQUIRED_ANNOTATION}': '{BLOCK_LABEL}'" in str(manifests["job-b"])
    assert names.TOPOLOGY_REQUIRED_ANNOTATION not in str(manifests["job-a"])


def pod(name, node, *, phase="Running", deleting=False):
    made = builders.pod(name, labels={"training.kubeflow.org/job-name": "j"},
                        annotations={"sim.gangkeeper.io/world-size": "2"}, node_name=node, phase=phase)
    if deleting:
        made["metadata"]["deletionTimestamp"] = "2026-01-01T00:10:00Z"
    return made


def test_placements_record_the_nodes_each_time_all_members_begin_to_run_together():
    placements = Placements()
    for event in [WatchEvent("ADDED", "pods", pod("a", None, phase="Pending")),
                  WatchEvent("MODIFIED", "pods", pod("a", "n1", phase="Pending")),
                  WatchEvent("MODIFIED", "pods", pod("a", "n1")),
                  WatchEvent("ADDED", "pods", pod("b", "n2")),  # now both run: placed on n1, n2
                  WatchEvent("MODIFIED", "pods", pod("b", "n2")),  # still together: nothing new
                  WatchEvent("MODIFIED", "pods", pod("b", "n2", deleting=True)),
                  WatchEvent("DELETED", "pods", pod("b", "n2", deleting=True)),
                  WatchEvent("ADDED", "pods", pod("c", "n3"))]:  # together again, elsewhere
        placements.observe(event, 0.0)
    assert placements.snapshot() == {"PyTorchJob ml/j": [("n1", "n2"), ("n1", "n3")]}


def test_spanned_counts_domains_and_a_node_without_the_label_as_one_of_its_own():
    labels = {"n1": {"b": "x"}, "n2": {"b": "x"}, "n3": {"b": "y"}, "n4": {}}
    assert spanned(["n1", "n2"], labels, "b") == 1
    assert spanned(["n1", "n3"], labels, "b") == 2
    assert spanned(["n1", "n4", "n5"], labels, "b") == 3


def test_job_rows_and_figures_over_subsets():
    jobs = [Job("j1", 0.0, 16, 100.0), Job("j2", 0.0, 32, 100.0), Job("j3", 0.0, 4, 100.0), Job("j4", 0.0, 16, 100.0)]
    measured = [{"job": "PyTorchJob ml/j1", "submitted": 0.0, "started": 10.0, "finished": 110.0},
                {"job": "PyTorchJob ml/j2", "submitted": 0.0, "started": 40.0, "finished": 140.0},
                {"job": "PyTorchJob ml/j3", "submitted": 0.0, "started": 2.0, "finished": 102.0},
                {"job": "PyTorchJob ml/j4", "submitted": 5.0, "started": None, "finished": None}]
    labels = {f"n{i}": {BLOCK_LABEL: f"b{i // 2}", ZONE_LABEL: "z"} for i in range(8)}
    placements = {"PyTorchJob ml/j1": [("n0", "n1")], "PyTorchJob ml/j2": [("n1", "n2", "n3", "n4"), ("n4",)],
                  "PyTorchJob ml/j3": [("n5",)]}
    rows = job_rows(jobs, measured, placements, labels, Layout(), Cluster(nodes=8), {"j1", "j4"})
    assert [(r["multi_node"], r["declaring"], r["blocks"], r["zones"], r["placements"]) for r in rows] == [
        (True, True, 1, 1, 1), (True, False, 3, 1, 2), (False, False, 1, 1, 1), (True, True, None, None, 0)]
    figures = topology.topology_figures(rows)
    multi = figures["multi_node"]
    assert (multi["jobs"], multi["placed"], multi["in_one_block"], multi["in_one_zone"]) == (3, 2, 1, 2)
    assert (multi["within_one_block"], multi["mean_blocks"], multi["placed_again"]) == (0.5, 2, 1)
    assert (multi["mean_delay_s"], multi["p95_delay_s"], multi["completed"]) == (25.0, 40.0, 2)
    assert figures["declaring"]["jobs"] == 2 and figures["declaring"]["within_one_block"] == 1.0
    assert figures["other_multi_node"]["mean_blocks"] == 3 and figures["all"]["mean_delay_s"] == pytest.approx(52 / 3)
    empty = subset_figures([])
    assert empty["within_one_block"] is None and empty["mean_delay_s"] is None and empty["jobs"] == 0


@pytest.mark.slow
def test_a_quick_run_and_its_markdown():
    cluster, layout = Cluster(nodes=8), Layout(zone_nodes=8, block_nodes=4)
    results = topology.run(jobs=30, seed=20190710, horizon=3600.0, cluster=cluster, layout=layout,
                           policies_run=("stock", "gangkeeper", "gangkeeper-required"))
    setup = results["setup"]
    assert setup["zones"] == 1 and setup["blocks"] == 2 and setup["multi_node_jobs"] >= 1
    assert setup["declaring_jobs"] == round(0.5 * sum(n for size, n in setup["multi_node_sizes"].items() if size <= 32))
    runs = {run["policy"]: run for run in results["runs"]}
    required = runs["gangkeeper-required"]["topology"]["declaring"]
    assert required["placed"] >= 1 and required["in_one_block"] == required["placed"], "each that ran, in one block"
    for run in results["runs"]:
        assert run["topology"]["all"]["jobs"] == 30
        assert run["topology"]["all"]["completed"] == 30 - run["figures"]["not_completed"]
    text = topology_report.markdown(results)
    assert text.startswith("## Topology: 50% of the multi-node jobs want one block, load 0.9")
    assert "gangkeeper, sample requires one block, against gangkeeper without a rule:" in text
    assert f"| {topology_report.within(required)} |" in text
    assert "gangkeeper, sample prefers one block" not in text  # not run
