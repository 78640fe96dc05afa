"""`gangkeeper demo`, small: 2 nodes × 4 GPUs, 2 PyTorchJobs × 6 pods, real webhook and controller.

The outcome is read from the cluster and from what the real processes wrote (their audit logs),
never from how long anything took.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from demo import scenario
from demo.view import LogView
from gangkeeper import names

pytestmark = pytest.mark.e2e

REPOSITORY = Path(__file__).resolve().parents[2]
SMALL = ["--nodes", "2", "--gpus-per-node", "4", "--workers-per-job", "6", "--jobs", "2",
         "--phase1-seconds", "10", "--train-seconds", "16", "--speed", "8", "--no-live"]
SETTINGS = scenario.Settings(nodes=2, gpus_per_node=4, workers_per_job=6, jobs=2, phase1_seconds=10,
                             train_seconds=16, speed=8)


def audit(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("demo")
    chart = workdir / "timeline.png"
    command = [sys.executable, "-m", "gangkeeper.cli", "demo", *SMALL, "--chart", str(chart), "--workdir", str(workdir)]
    completed = subprocess.run(command, check=False, cwd=REPOSITORY, capture_output=True, text=True, timeout=240)
    return completed, workdir, chart


def test_the_demo_shows_the_deadlock_then_both_jobs_completing_whole(demo_run):
    completed, workdir, chart = demo_run
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    out = completed.stdout
    assert "DEADLOCKED after 10 s of cluster time: train-a 4/6 running, train-b 4/6 running; all 8 GPUs held" in out
    assert "all 2 jobs completed" in out and "GPU-seconds held while a pod had no node: 0." in out
    assert "FAILED" not in out
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    mutations = [e for e in audit(workdir / "webhook-audit.jsonl") if e["event"] == "admission.mutate"]
    gated = {e["pod"] for e in mutations if e["decision"] == "patched"}
    assert len(gated) == 12  # every pod of both jobs went through the real webhook
    denials = [e for e in audit(workdir / "webhook-audit.jsonl")
               if e["event"] == "admission.validate" and e["decision"] == "denied"]
    assert denials and all(e["user"] == "kubernetes-admin" for e in denials)
    released = [e for e in audit(workdir / "controller-audit.jsonl") if e["event"] == "gang.released"]
    assert {e["group"].rsplit("-", 5)[0] for e in released} == {"train-a", "train-b"}


class Recorder(LogView):
    """The plain view, keeping every snapshot it was shown."""

    def __init__(self):
        super().__init__(SETTINGS.train_seconds)
        self.snapshots = []

    def tick(self, snapshot, *, force=False):
        self.snapshots.append(snapshot)
        super().tick(snapshot, force=force)


def test_phase_1_deadlocks_on_the_stock_scheduler():
    view = Recorder()
    result = scenario.phase1(SETTINGS, view)
    final = result.final
    assert final.held_gpus == 8 and result.passed
    assert all(j.started is None and j.finished is None and j.pending == 2 for j in final.jobs)
    assert all(j.stranded_gpu_seconds > 0 for j in final.jobs)


def test_without_the_controller_every_pod_stays_gated_and_a_user_cannot_ungate_one(tmp_path):
    view = Recorder()
    result = scenario.phase2(SETTINGS, view, tmp_path, use_controller=False)
    assert result.passed and not result.controller_ran
    assert "NOT AVAILABLE" in result.verdict
    assert all(s.held_gpus == 0 for s in view.snapshots)
    assert all(j.gated == j.size == j.created for j in result.final.jobs)
    events = audit(tmp_path / "webhook-audit.jsonl")
    assert sum(e["event"] == "admission.mutate" and e["decision"] == "patched" for e in events) == 12
    denied = [e for e in events if e["event"] == "admission.validate" and e["decision"] == "denied"]
    assert len(denied) == 1 and names.SCHEDULING_GATE in denied[0]["reason"]
