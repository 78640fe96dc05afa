"""Clusters as the index holds them, for the planner's tests of what decides besides resources:
nodes by hostname, the pods around a member, devices (DRA) and a group's plan on them."""

from collections import Counter

from gangkeeper.controller.cache.index import NODES, PODS, ClusterIndex
from gangkeeper.controller.cache.occupancy import DEVICE_CLASSES, RESOURCE_CLAIM_TEMPLATES, RESOURCE_SLICES
from gangkeeper.controller.model.members import group_of
from gangkeeper.controller.planning.planner import plan_group
from gangkeeper.controller.planning.plans import Plan, Topology
from gangkeeper.controller.reading.pods import member_from_api, pod_facts
from tests.controller.builders import node, pod_object

HOSTNAME = "kubernetes.io/hostname"
DRIVER = "gpu.example.com"


def world(nodes, objects=(), pods=()):
    index = ClusterIndex()
    index.apply([(NODES, n.name, n) for n in nodes])
    index.apply(objects)
    index.apply([(PODS, f"{p['metadata']['namespace']}/{p['metadata']['name']}", pod_facts(p)) for p in pods])
    return index


def hosts(*names, gpus=8, **kwargs):
    return [node(name, gpus=gpus, labels={HOSTNAME: name}, **kwargs) for name in names]


def plan(index, group):
    return plan_group(group, index.pool, index.ledger, Topology(), index.occupancy)


def placement(outcome):
    assert isinstance(outcome, Plan), outcome
    return Counter(node for _, node in outcome.assignments)


def gang_of(name, size, spec=None, **pod):
    """A group of `size` members labelled `job: name`, their pods carrying `spec` too."""
    members = [member_from_api(with_spec(with_labels(pod_object(f"{name}-{i}", **pod), {"job": name}), **(spec or {})))
               for i in range(size)]
    return group_of(("team", name), members, size, 0.0)


def with_labels(pod, labels):
    pod["metadata"]["labels"] = {**pod["metadata"].get("labels", {}), **labels}
    return pod


def with_spec(pod, **spec):
    pod["spec"].update(spec)
    return pod


def running(name, node_name, labels=None, gpus=0, **spec):
    return with_spec(with_labels(pod_object(name, gpus=gpus, gated=False, node_name=node_name, phase="Running"),
                                 labels or {}), **spec)


def anti_affinity(key, labels):
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": labels}, "topologyKey": key}]}}


def device_class(name=DRIVER, extended=None):
    spec = {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]}
    if extended:
        spec["extendedResourceName"] = extended
    return DEVICE_CLASSES, name, {"metadata": {"name": name}, "spec": spec}


def device_slice(node_name, devices):
    return RESOURCE_SLICES, f"{node_name}-gpus", {
        "metadata": {"name": f"{node_name}-gpus"},
        "spec": {"driver": DRIVER, "nodeName": node_name, "pool": {"name": node_name, "generation": 1,
                                                                   "resourceSliceCount": 1},
                 "devices": [{"name": f"gpu-{i}"} for i in range(devices)]}}


def template(name="one-gpu", count=1, device_class_name=DRIVER):
    return RESOURCE_CLAIM_TEMPLATES, f"team/{name}", {
        "metadata": {"name": name, "namespace": "team"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": device_class_name, "allocationMode": "ExactCount", "count": count}}]}}}}


def claiming(name, template_name="one-gpu", **kwargs):
    return with_spec(pod_object(name, gpus=0, **kwargs),
                     resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": template_name}])
