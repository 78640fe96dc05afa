"""The pod says why (issue 26): in the playground (`gangkeeper sim serve`: the webhook and the
controller running on the emulated cluster), the real kubectl reads on each pod what gangkeeper
told it, as a user who has never heard of Gangs looks for it: `kubectl describe pod` and
`kubectl get events`.

One playground for the module, six nodes of 8 GPUs in two zones of three, a namespace gangkeeper
enforces and two PriorityClasses: a low-priority Job of 2 × 8 GPUs runs (filler, on two nodes of
one zone); a pod of a group declared as 2 waits for the other (half: incomplete); a Job of 2 ×
16 GPUs waits for nodes no cluster of 8-GPU nodes has (huge: no fit); a Job of 4 × 8 GPUs that
must sit in one zone waits although the cluster has room for it (wide: topology); then a
high-priority Job of 5 × 8 GPUs takes filler's place (urgent: preempting) and runs, released with
its group.
"""

import json
import time
from pathlib import Path

import pytest

from demo.processes import free_port
from tests.sim_cluster.playground import SETTLE_SECONDS, PlaygroundUser, Served, line_after

pytestmark = pytest.mark.e2e

NS = "team"
ZONE = "topology.kubernetes.io/zone"
SPEC = f"""\
nodes:
  - {{count: 3, gpusPerNode: 8, namePrefix: a, labels: {{{ZONE}: a}}}}
  - {{count: 3, gpusPerNode: 8, namePrefix: b, labels: {{{ZONE}: b}}}}
"""
SETUP = f"""\
apiVersion: v1
kind: Namespace
metadata: {{name: {NS}, labels: {{gangkeeper.io/enforce: "true"}}}}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {{name: low}}
value: 100
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {{name: high}}
value: 1000
"""
HALF = f"""\
apiVersion: v1
kind: Pod
metadata:
  name: half-0
  namespace: {NS}
  labels: {{gangkeeper.io/group: half}}
  annotations: {{gangkeeper.io/min-count: "2"}}
spec:
  priorityClassName: low
  containers:
    - name: train
      image: busybox:1.36
      resources: {{limits: {{nvidia.com/gpu: "8"}}}}
"""


def job(name: str, pods: int, gpus: int, priority_class: str, annotations: str = "") -> str:
    return f"""\
apiVersion: batch/v1
kind: Job
metadata: {{name: {name}, namespace: {NS}}}
spec:
  parallelism: {pods}
  completions: {pods}
  template:
    metadata: {{annotations: {{{annotations}}}}}
    spec:
      priorityClassName: {priority_class}
      restartPolicy: Never
      terminationGracePeriodSeconds: 1
      containers:
        - name: train
          image: busybox:1.36
          resources: {{limits: {{nvidia.com/gpu: "{gpus}"}}}}
"""


class Playground(PlaygroundUser):
    def described_events(self, pod: str, wanted: str) -> str:
        """The Events section of `kubectl describe pod`, once it has a line saying `wanted`."""
        deadline = time.monotonic() + SETTLE_SECONDS
        while wanted not in (events := self.kubectl("describe", "pod", pod, "-n", NS).stdout.split("\nEvents:", 1)[1]):
            assert time.monotonic() < deadline, f"{pod} never said {wanted!r}: {events}"
            time.sleep(0.5)
        return events


@pytest.fixture(scope="module")
def playground(tmp_path_factory):
    root = tmp_path_factory.mktemp("pod-events")
    spec = root / "spec.yaml"
    spec.write_text(SPEC)
    served = Served(root, "--port", str(free_port()), "--spec", str(spec), "--work-dir", str(root / "work"))
    try:
        world = Playground(Path(line_after(served.banner(), "kubeconfig:")), root)
        world.apply(SETUP)
        world.apply(job("filler", 2, 8, "low"))
        world.settled("filler", "Running")
        world.apply(HALF + "---\n" + job("huge", 2, 16, "low") + "---\n"
                      + job("wide", 4, 8, "low", f"gangkeeper.io/topology-required: {ZONE}"))
        for name in ("half", "huge", "wide"):
            world.settled(name, "Waiting")
        world.apply(job("urgent", 5, 8, "high"))
        world.settled("urgent", "Running")
        yield world
    finally:
        assert served.stop() == 0, served.stderr_path.read_text()


def line_of(events: str, reason: str) -> str:
    """The Event line of `kubectl describe` with that reason, from gangkeeper."""
    return next(line for line in events.splitlines() if line.split()[1:2] == [reason])


def test_a_member_of_a_group_short_of_members_says_how_many_more_and_what_declared_the_size(playground):
    events = playground.described_events("half-0", "Incomplete")
    line = line_of(events, "Incomplete")
    assert line.split()[0] == "Normal" and "gangkeeper-controller" in line
    assert line.endswith("  Waiting for 1 more pod of group half (1 of 2 present; gangkeeper.io/min-count=2)"), events


def test_a_member_that_fits_no_node_says_what_it_lacks_and_where_to_look(playground):
    gang = playground.gang("huge")["metadata"]["name"]
    events = playground.described_events(sorted(playground.pods("huge"))[0], "NoFit")
    message = line_of(events, "NoFit").split("gangkeeper-controller", 1)[1].strip()
    assert message.startswith("Waiting: 0 of 2 waiting members placeable: needs 2 × 16 nvidia.com/gpu (32 in all, "
                              "16 on one node each)"), message
    assert message.endswith(f"(kubectl get gang {gang} -n {NS})")
    on_gang = json.loads(playground.kubectl("get", "events", "-n", NS, "--field-selector",
                                            f"involvedObject.name={gang},reason=NoFit", "-o", "json").stdout)["items"]
    assert [f"Waiting: {event['message']} (kubectl get gang {gang} -n {NS})" for event in on_gang] == [message], \
        "the Gang's words"


def test_a_member_no_zone_holds_says_so(playground):
    gang = playground.gang("wide")["metadata"]["name"]
    for pod in playground.pods("wide"):
        events = playground.described_events(pod, f"Waiting: required {ZONE}: needs 32 nvidia.com/gpu in one zone;")
        topology = next(line for line in events.splitlines() if f"required {ZONE}: needs 32" in line)
        assert topology.split()[:2] == ["Normal", "NoFit"] and "24 free" in topology and "8 free" in topology
        assert topology.endswith(f"(kubectl get gang {gang} -n {NS})")


def test_a_member_preempting_says_what_it_takes_then_that_it_was_released_with_its_group(playground):
    gang = playground.gang("urgent")["metadata"]["name"]
    for pod, node in playground.pods("urgent").items():
        listed = playground.kubectl("get", "events", "-n", NS, "--field-selector", f"involvedObject.name={pod}",
                                    "-o", "json").stdout
        said = {event["reason"]: event["message"] for event in json.loads(listed)["items"]}
        assert said["Preempting"] == (f"Waiting: 5 members reserved; preempting 1 of lower priority, 2 pods (Job "
                                      f"filler); released once they are gone (kubectl get gang {gang} -n {NS})")
        assert said["Released"] == f"Released to {node} with its group of 5"
        events = playground.described_events(pod, "Released")
        assert line_of(events, "Released").endswith(f"  Released to {node} with its group of 5"), events
