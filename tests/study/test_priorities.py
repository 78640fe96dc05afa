"""The priority mix's measurements: preemptions and the training they interrupt, figures per
class, and the Markdown that says which policy does best. Virtual clock; no timed assertions."""

import pytest

from sim.api import WatchEvent
from sim.clock import VIRTUAL_EPOCH
from study.metrics import Holdings, Preemptions, by_class
from study.priorities import POLICIES, job_rows
from study.priority_report import best_notes, markdown, repeat_notes
from study.run import Cluster, run_policy, spec_for
from study.trace import HIGH, LOW, Job
from tests import builders

HOUR = 3600.0
# 16 low-priority GPUs fill both nodes from t=0; at t=600 an 8-GPU high-priority job arrives and
# fits only once the low one loses a node: it is preempted after some 600 s of training.
VICTIM = Job("job-a", 0.0, 16, HOUR, LOW.name)
PREEMPTOR = Job("job-b", 600.0, 8, 600.0, HIGH.name)
TWO_NODES = Cluster(nodes=2)


class HoldingsAt(Holdings):
    """`Holdings`, read once at `moment` (absolute, on the virtual clock)."""

    def __init__(self, moment: float):
        super().__init__()
        self.moment, self.seen = moment, None

    def next_due(self) -> float | None:
        return self.moment if self.seen is None else None

    def step(self, now: float) -> bool:
        if self.seen is None and now >= self.moment:
            self.seen = self.snapshot(now)
        return False


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["stock", "gangkeeper"])
def test_a_job_preempted_after_training_counts_what_it_had_trained_and_trains_it_once(policy):
    jobs = [VICTIM, PREEMPTOR]
    preemptions, before_resuming = Preemptions(), HoldingsAt(VIRTUAL_EPOCH + 900)  # job-b runs until ~1200
    outcome = run_policy(policy, jobs, spec_for(jobs, TWO_NODES), TWO_NODES, drain=3 * HOUR,
                         watchers=[preemptions, before_resuming])
    victim, preemptor = (f"PyTorchJob ml/{job.name}" for job in jobs)
    trained = before_resuming.seen[victim]["useful"]
    assert trained > 0, "the victim had made progress when it was preempted"
    assert preemptions.snapshot() == {victim: {"preemptions": 1, "interruptions": 1, "at_stake": trained,
                                               "other_interruptions": 0}}
    rows = job_rows(jobs, outcome["jobs"], preemptions.snapshot())
    low, high = by_class([rows[0]]), by_class([rows[1]])
    assert (low["victims"], low["preemptions"], low["not_completed"]) == (1, 1, 0)
    assert low["at_stake_gpu_hours"] == trained / 3600
    assert low["redone_gpu_hours"] == pytest.approx(0, abs=1e-9), "the emulation resumes it where it stopped"
    assert rows[0]["useful"] == pytest.approx(16 * HOUR)
    assert (high["victims"], high["at_stake_gpu_hours"]) == (0, 0)
    assert outcome["jobs"][1]["job"] == preemptor and outcome["jobs"][1]["started"] < VIRTUAL_EPOCH + 900


def pod(name, *, phase="Running", deleting=False, preempted=False, uid=None):
    made = builders.pod(name, uid=uid or name, labels={"training.kubeflow.org/job-name": "j"},
                        annotations={"sim.gangkeeper.io/world-size": "2"}, node_name=f"node-{name}", phase=phase,
                        containers=[builders.container("c", requests={builders.GPU: "4"})])
    if deleting:
        made["metadata"]["deletionTimestamp"] = "2026-01-01T00:10:00Z"
    if preempted:
        made["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True",
                                         "reason": "PreemptionByScheduler"}]
    return made


def preempted_event(pod_name):
    return {"metadata": {"name": f"{pod_name}.e", "namespace": "ml"}, "reason": "Preempted",
            "involvedObject": {"kind": "Pod", "name": pod_name, "namespace": "ml"}}


def running_from(moment):
    preemptions = Preemptions()
    for name in ("a", "b"):
        preemptions.observe(WatchEvent("ADDED", "pods", pod(name)), moment)
    return preemptions


def test_the_schedulers_mark_before_the_deletion_makes_the_interruption_preemptions():
    preemptions = running_from(100)
    preemptions.observe(WatchEvent("MODIFIED", "pods", pod("a", preempted=True)), 400)
    preemptions.observe(WatchEvent("MODIFIED", "pods", pod("a", preempted=True, deleting=True)), 400)
    preemptions.observe(WatchEvent("DELETED", "pods", pod("a", preempted=True, deleting=True)), 401)
    assert preemptions.snapshot()["PyTorchJob ml/j"] == {
        "preemptions": 1, "interruptions": 1, "at_stake": 8 * 300, "other_interruptions": 0}


def test_gangkeepers_event_after_the_pods_began_to_go_still_makes_the_interruption_preemptions():
    preemptions = running_from(0)
    preemptions.observe(WatchEvent("MODIFIED", "pods", pod("a", deleting=True)), 50)
    preemptions.observe(WatchEvent("ADDED", "events", preempted_event("a")), 50)
    preemptions.observe(WatchEvent("ADDED", "events", preempted_event("b")), 50)
    assert preemptions.snapshot()["PyTorchJob ml/j"] == {
        "preemptions": 1, "interruptions": 1, "at_stake": 8 * 50, "other_interruptions": 0}


def test_a_run_finishing_is_no_interruption_and_a_deletion_nothing_explains_counts_apart():
    finished = running_from(0)
    finished.observe(WatchEvent("MODIFIED", "pods", pod("a", phase="Succeeded")), 60)
    finished.observe(WatchEvent("MODIFIED", "pods", pod("b", phase="Succeeded")), 60)
    assert finished.snapshot() == {}
    deleted = running_from(0)
    deleted.observe(WatchEvent("DELETED", "pods", pod("a")), 60)
    deleted.observe(WatchEvent("ADDED", "pods", pod("a", phase="Running", uid="a2")), 90)  # recreated: together again
    assert deleted.snapshot()["PyTorchJob ml/j"] == {
        "preemptions": 0, "interruptions": 0, "at_stake": 0.0, "other_interruptions": 1}


def test_figures_per_class_count_delay_time_waited_and_training_done_twice():
    rows = [{"submitted": 0, "started": 10, "finished": 200, "duration": 100, "gpus": 2, "useful": 200,
             "preemptions": 2, "interruptions": 1, "at_stake": 7200},
            {"submitted": 0, "started": 30, "finished": 130, "duration": 100, "gpus": 1, "useful": 100 + 3600,
             "preemptions": 0, "interruptions": 0, "at_stake": 0},
            {"submitted": 50, "started": None, "finished": None, "duration": 100, "gpus": 1, "useful": 0,
             "preemptions": 0, "interruptions": 0, "at_stake": 0}]
    figures = by_class(rows)
    assert (figures["jobs"], figures["not_completed"]) == (3, 1)
    assert (figures["mean_delay_s"], figures["p95_delay_s"]) == (20, 30)
    assert (figures["mean_waited_s"], figures["p95_waited_s"]) == (65, 100)  # 200 − 0 − 100 and 130 − 0 − 100
    assert (figures["victims"], figures["preemptions"], figures["interruptions"]) == (1, 2, 1)
    assert figures["at_stake_gpu_hours"] == 2 and figures["redone_gpu_hours"] == 1


def results_where(delays: dict[str, float]) -> dict:
    def figures(delay):
        return {"jobs": 10, "not_completed": 0, "mean_delay_s": delay, "p95_delay_s": delay, "mean_waited_s": delay,
                "p95_waited_s": delay, "victims": 0, "preemptions": 0, "interruptions": 0,
                "at_stake_gpu_hours": 0.0, "redone_gpu_hours": 0.0}

    runs = [{"policy": policy, "counters": {"wall_seconds": 1.0}, "other_interruptions": 0,
             "figures": {"partial_gpu_hours": 0.0, "utilisation": 0.5, "not_completed": 0},
             "classes": {HIGH.name: figures(delay), LOW.name: figures(2 * delay)}} for policy, delay in delays.items()]
    setup = {"jobs": 20, "seed": 1, "load": 0.9, "offered_load": 0.9, "high_share": 0.2,
             "shares": {HIGH.name: 0.2, LOW.name: 0.8}, "classes": {HIGH.name: 1000, LOW.name: 100},
             "drain_seconds": HOUR, "cluster": {"nodes": 2, "gpus_per_node": 8}, "cluster_gpus": 16}
    return {"setup": setup, "runs": runs, "repeats": []}


def test_where_a_baseline_does_best_the_notes_say_so():
    results = results_where({"stock": 5.0, "quota": 900.0, "gangkeeper": 60.0, "gangkeeper-no-preemption": 600.0})
    [high_mean] = [note for note in best_notes(results) if note.startswith("high-priority jobs' mean")]
    assert high_mean.startswith("high-priority jobs' mean queueing delay: best under stock scheduler — a baseline "
                                "does better than gangkeeper here")
    text = markdown(results)
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [row.split(" | ")[0] for row in rows] == ["| stock scheduler", "| quota-only gate",
                                                     "| gangkeeper (preemption on)", "| gangkeeper (preemption off)"]
    assert len(rows) == len(POLICIES)


def test_where_gangkeeper_does_best_no_baseline_is_credited():
    results = results_where({"stock": 500.0, "quota": 900.0, "gangkeeper": 60.0, "gangkeeper-no-preemption": 600.0})
    [high_mean] = [note for note in best_notes(results) if note.startswith("high-priority jobs' mean")]
    assert high_mean.startswith("high-priority jobs' mean queueing delay: best under gangkeeper (preemption on) (")


def test_a_second_replay_says_which_of_its_rows_figures_came_out_otherwise():
    results = results_where({"stock": 5.0, "quota": 900.0, "gangkeeper": 60.0, "gangkeeper-no-preemption": 600.0})
    [first] = [run for run in results["runs"] if run["policy"] == "gangkeeper"]
    results["repeats"] = [first]
    assert repeat_notes(results) == ["gangkeeper (preemption on), replayed a second time from the same trace: "
                                     "every figure of its row came out the same this time"]
    again = {**first, "classes": {**first["classes"], HIGH.name: {**first["classes"][HIGH.name], "victims": 3}}}
    results["repeats"] = [again]
    assert repeat_notes(results) == ["gangkeeper (preemption on), replayed a second time from the same trace: "
                                     "victim jobs (preemptions) 3 (0) (table: 0 (0))"]
    assert "victim jobs (preemptions) 3 (0) (table: 0 (0))" in markdown(results)
