"""`kubectl gang` as a user runs it: the real kubectl finds `kubectl-gang` on PATH and hands it
the rest of the line, against the playground (`gangkeeper sim serve`: the webhook and controller
running on the emulated cluster).

One playground for the module: three nodes of 8 GPUs, a namespace gangkeeper enforces, two
PriorityClasses; a low-priority Job of 2 × 8 GPUs running on two of the nodes (filler) and
another waiting for room it cannot have (stuck). Then `why` about the waiting one, `plan -f` of
a Job that fits (on the free node), one that does not (too many GPUs) and one that would preempt
(high priority: filler is its victim), and `top`.
"""

import json
from pathlib import Path

import pytest

from demo.processes import free_port
from tests.sim_cluster.playground import PlaygroundUser, Served, line_after

pytestmark = pytest.mark.e2e

SETUP = """\
apiVersion: v1
kind: Namespace
metadata: {name: team, labels: {gangkeeper.io/enforce: "true"}}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 100
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
"""


def job(name: str, pods: int, gpus: int, priority_class: str) -> str:
    return f"""\
apiVersion: batch/v1
kind: Job
metadata: {{name: {name}, namespace: team}}
spec:
  parallelism: {pods}
  completions: {pods}
  template:
    spec:
      priorityClassName: {priority_class}
      restartPolicy: Never
      containers:
        - name: train
          image: busybox:1.36
          resources: {{limits: {{nvidia.com/gpu: "{gpus}"}}}}
"""


@pytest.fixture(scope="module")
def playground(tmp_path_factory):
    root = tmp_path_factory.mktemp("kubectl-gang")
    served = Served(root, "--port", str(free_port()), "--nodes", "3", "--gpus-per-node", "8", "--work-dir",
                    str(root / "work"))
    try:
        banner = served.banner()
        world = PlaygroundUser(Path(line_after(banner, "kubeconfig:")), root)
        world.apply(SETUP)
        world.apply(job("filler", 2, 8, "low"))
        world.settled("filler", "Running")
        world.apply(job("stuck", 2, 8, "low"))
        world.settled("stuck", "Waiting")
        yield world
    finally:
        assert served.stop() == 0, served.stderr_path.read_text()


def test_why_a_job_waits_names_the_constraint_the_closest_nodes_and_its_preemption_options(playground):
    stuck = sorted(playground.pods("stuck"))
    answer = playground.kubectl("gang", "why", stuck[0], "-n", "team").stdout
    free = ({"node-0", "node-1", "node-2"} - set(playground.pods("filler").values())).pop()
    assert "Verdict:    Waits\n" in answer and "Constraint: nvidia.com/gpu\n" in answer, answer
    assert "Why:        1 of 2 waiting members placeable: needs 2 × 8 nvidia.com/gpu" in answer
    assert "Queue:      1 of 1 waiting to be admitted; ahead: none\n" in answer
    assert "Preemption: none: no running group or pod of priority below 100 holds capacity\n" in answer
    for pod in stuck:
        assert f"{pod}   gated   -      8" in answer
    closest = answer.split("CLOSEST NODE")[1].splitlines()
    assert closest[1].split() == [free, "nvidia.com/gpu=8", "1", "-"], answer
    assert [row.split()[-3:] for row in closest[2:4]] == [["lacks", "8", "nvidia.com/gpu"]] * 2
    assert "Gang says:  Waiting, NoFit: 1 of 2 waiting members placeable" in answer  # the controller's own words
    assert "NoFit" in answer.split("Events:")[1]


def test_why_speaks_json_for_scripts_and_finds_the_group_by_its_gang(playground):
    by_pod = json.loads(playground.kubectl("gang", "why", sorted(playground.pods("stuck"))[0], "-n", "team",
                                           "-o", "json").stdout)
    by_gang = json.loads(playground.kubectl("gang", "why", f"gang/{by_pod['gang']}", "-n", "team", "-o",
                                            "json").stdout)
    assert by_pod["verdict"] == by_gang["verdict"] == "Waits" and by_gang["owner"] == "Job stuck"


def test_a_name_of_no_pod_or_gang_is_one_line(playground):
    unknown = playground.kubectl("gang", "why", "stuck-0", "-n", "team", check=False)
    assert (unknown.returncode, unknown.stdout) == (1, "")
    assert unknown.stderr == ("kubectl gang: no pod or Gang named stuck-0 in namespace team; name a pod of the group, "
                              "its Gang or its group label (kubectl get gangs -n team)\n")


def test_plan_of_a_job_that_fits_names_its_nodes(playground):
    free = ({"node-0", "node-1", "node-2"} - set(playground.pods("filler").values())).pop()
    answer = playground.kubectl("gang", "plan", "-f", "-", stdin=job("small", 2, 4, "low")).stdout
    assert "Group:      team/small-new\n" in answer and "Verdict:    Fits\n" in answer, answer
    assert f"NODE     PODS\n{free}   small-0, small-1\n" in answer


def test_plan_of_a_job_that_does_not_fit_names_the_constraint(playground, tmp_path):
    manifest = tmp_path / "too-big.yaml"
    manifest.write_text(job("large", 4, 8, "low"))
    answer = playground.kubectl("gang", "plan", "-f", str(manifest), "--kubeconfig", str(playground.kubeconfig)).stdout
    assert "Verdict:    Waits\n" in answer and "Constraint: nvidia.com/gpu\n" in answer, answer
    assert "needs 4 × 8 nvidia.com/gpu (32 in all, 8 on one node each)" in answer
    assert "Queue:      2 of 2 waiting to be admitted; ahead: team/stuck-" in answer


def test_plan_of_a_job_that_would_preempt_names_its_victims(playground):
    answer = json.loads(playground.kubectl("gang", "plan", "-f", "-", "-o", "json",
                                           stdin=job("urgent", 2, 8, "high")).stdout)
    (group,) = answer["groups"]
    assert (group["verdict"], group["priority"]) == ("Preempts", 1000)
    (victim,) = group["preemption"]["victims"]
    assert (victim["owner"], victim["priority"], victim["pods"], victim["accelerators"]) == ("Job filler", 100, 2, 16)
    assert sorted(victim["nodes"]) == sorted(playground.pods("filler").values())
    table = playground.kubectl("gang", "plan", "-f", "-", stdin=job("urgent", 2, 8, "high")).stdout
    assert "VICTIM" in table and "Job filler" in table


def test_top_lists_the_groups_by_phase(playground):
    rows = [line.split() for line in playground.kubectl("gang", "top", "-A").stdout.splitlines()]
    assert rows[0] == ["NAMESPACE", "GANG", "PHASE", "REASON", "PODS", "ACCELERATORS", "WAITING"]
    assert [(row[0], row[1].rsplit("-", 1)[0], row[2], row[3], row[4], row[5]) for row in rows[1:3]] == [
        ("team", "stuck", "Waiting", "NoFit", "2/2", "16"), ("team", "filler", "Running", "Bound", "2/2", "16")]
    assert rows[-1] == ["Waiting:", "1", "group,", "16", "accelerators;", "Running:", "1", "group,", "16",
                        "accelerators"]


def test_what_the_users_credentials_may_not_read_is_said(playground):
    """The controller's service account may not list Events: `why` answers without them, and says so."""
    stuck = sorted(playground.pods("stuck"))[0]
    controller = f"{playground.kubeconfig}.controller"
    answer = playground.kubectl("gang", "why", stuck, "-n", "team", "--kubeconfig", controller).stdout
    assert "Events:\n  not read\n" in answer and "Not read: events in namespace team (forbidden)." in answer


def test_a_missing_kubeconfig_is_one_line(playground):
    missing = playground.kubectl("gang", "top", "-A", "--kubeconfig", str(playground.work / "nowhere"), check=False)
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr == (f"kubectl gang: kubeconfig {playground.work / 'nowhere'} does not exist; pass the "
                              f"cluster's kubeconfig with --kubeconfig (env KUBECONFIG)\n")
