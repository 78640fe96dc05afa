"""What takes a gang back, for the end-to-end tests on the emulated cluster: a release spoilt by a
change the planner could not foresee, and a gang of higher priority that needs the room.

`Spoiler` taints, once, the node of the first member gangkeeper releases, from its watch event and
so within the same settle of the emulated cluster as the release: the scheduler refuses the member
(`Unschedulable`) and gangkeeper takes its group back whole. `urgent_job()` is a Job of the
`high` class of `PRIORITY_CLASSES` (which a cluster's spec lists) asking for a whole 8-GPU node:
gangkeeper makes room for it by preempting a gang of the `low` class.
"""

from sim.api import ADMIN, WatchEvent
from sim.names import DURATION_ANNOTATION, NODES, PODS

SPOILT = {"key": "example.com/spoilt", "effect": "NoSchedule"}
PRIORITY_CLASSES = "priorityClasses: [{name: low, value: 10}, {name: high, value: 1000}]"
URGENT = "urgent"


class Spoiler:
    """Taints, once, the node of the first member released (`tainted` names it)."""

    resources = (PODS,)

    def __init__(self, api):
        self.api, self.tainted = api, ""

    def observe(self, event: WatchEvent, now: float) -> None:
        spec = event.object["spec"]
        if self.tainted or spec.get("nodeName") or spec.get("schedulingGates") or event.type == "DELETED":
            return
        terms = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution")
        if terms:
            self.tainted = terms["nodeSelectorTerms"][0]["matchFields"][0]["values"][0]
            self.api.patch(NODES, self.tainted, {"spec": {"taints": [SPOILT]}}, user=ADMIN)

    def step(self, now: float) -> bool:
        return False

    def next_due(self) -> float | None:
        return None


def urgent_job() -> dict:
    """Job `urgent`: one pod of the high class that needs a whole node's 8 GPUs for 30 seconds."""
    container = {"name": "main", "image": "busybox:1.36", "resources": {"limits": {"nvidia.com/gpu": "8"}}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": URGENT},
            "spec": {"backoffLimit": 0, "template": {
                "metadata": {"annotations": {DURATION_ANNOTATION: "30"}},
                "spec": {"priorityClassName": "high", "restartPolicy": "Never", "containers": [container]}}}}
