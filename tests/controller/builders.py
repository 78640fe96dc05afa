"""Raw API objects for controller tests, turned into the model the way the cache will."""

import dataclasses

import msgspec

from gangkeeper import names
from gangkeeper.controller.cache.capacity import Ledger
from gangkeeper.controller.checks.eligibility import NodePool
from gangkeeper.controller.model.members import Group, Member, group_of
from gangkeeper.controller.model.nodes import Node
from gangkeeper.controller.reading.nodes import node_from_api
from gangkeeper.controller.reading.pods import member_from_api
from tests import builders


def replace(value, **changes):
    """`value` with `changes`, for any frozen value of the model: a dataclass (`Group`, `Node`) or
    a msgspec Struct (`Member`, `PodFacts`, made by the million at a relist)."""
    if isinstance(value, msgspec.Struct):
        return msgspec.structs.replace(value, **changes)
    return dataclasses.replace(value, **changes)


GPU = builders.GPU


def node_object(name, gpus=8, cpu="96", memory="1Ti", pods=110, labels=None, taints=(), ready=True,
                unschedulable=False, zone=None):
    labels = dict(labels or {})
    if zone:
        labels["topology.kubernetes.io/zone"] = zone
    allocatable = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    if gpus is not None:
        allocatable[GPU] = str(gpus)
    spec = {"taints": [dict(t) for t in taints]}
    if unschedulable:
        spec["unschedulable"] = True
    return {"metadata": {"name": name, "labels": labels}, "spec": spec,
            "status": {"allocatable": allocatable,
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def node(name, **kwargs) -> Node:
    return node_from_api(node_object(name, **kwargs))


def pod_object(name, gpus=8, cpu="4", memory="64Gi", namespace="team", uid=None, gated=True, node_name=None,
               node_selector=None, tolerations=None, affinity_terms=None, priority=None, phase="Pending",
               reserved_node=None, init_containers=(), overhead=None, created="2025-01-01T00:00:00Z"):
    """A pod as the cache reads it: requests only (what the controller counts), gated unless told."""
    requests = {"cpu": cpu, "memory": memory}
    if gpus:
        requests[GPU] = str(gpus)
    spec = {"initContainers": list(init_containers)}
    spec.update((field, value) for field, value in (("overhead", overhead), ("nodeSelector", node_selector),
                                                    ("tolerations", tolerations)) if value)
    if priority is not None:
        spec["priority"] = priority
    if affinity_terms is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                             {"nodeSelectorTerms": affinity_terms}}}
    annotations = {names.RESERVED_NODE_ANNOTATION: reserved_node} if reserved_node else {}
    return builders.pod(name, namespace=namespace, uid=uid or f"uid-{namespace}-{name}", created=created,
                        annotations=annotations, gates=(names.SCHEDULING_GATE,) if gated else (), node_name=node_name,
                        phase=phase, requests=requests, **spec)


def member(name, **kwargs) -> Member:
    return member_from_api(pod_object(name, **kwargs))


def gang(name, size, namespace="team", first_seen=0.0, min_count=None, **pod_kwargs) -> Group:
    members = [member(f"{name}-{i}", namespace=namespace, **pod_kwargs) for i in range(size)]
    return group_of((namespace, name), members, min_count or size, first_seen)


def cluster(nodes, bound=()):
    """A node pool and a ledger holding `bound` = [(node name, member)]."""
    ledger = Ledger(nodes)
    for node_name, pod in bound:
        ledger.bind(pod.uid, node_name, pod.requests)
    return NodePool(nodes), ledger


def busy(node_name, gpus, name=None):
    """A running pod using `gpus` GPUs on a node."""
    return node_name, member(name or f"busy-{node_name}-{gpus}", gpus=gpus, cpu="1", memory="1Gi", gated=False,
                             node_name=node_name, phase="Running")
