"""What devices (DRA) and pod constraints cost a planning pass, beside today's pass without them.

`run` builds, for each node count, the planner section's cluster (`bench/planner.py`: 8-GPU nodes
in 4 zones and racks of 16, `bound_pods` bound pods, `waiting_groups` gangs of 1–64 members, all
from the same seed) twice, and times on each the ledger (or index) build and two full planning
passes (`plan_pass`), the first and a second one with nothing changed:

  - **baseline**: exactly the planner section's pass: `nvidia.com/gpu` in every node's
    allocatable, the bound pods in a ledger, `plan_pass` without an occupancy;
  - **DRA + constraints**: the same nodes, pods and groups, but each node publishes its 8 GPUs as
    a ResourceSlice (driver `gpu.example.com`, devices gpu-0 … gpu-7) and lists none in its
    allocatable. One DeviceClass selects the driver's devices by CEL and serves `nvidia.com/gpu`
    (`extendedResourceName`, KEP-5004). The even waiting groups claim their GPUs through a
    ResourceClaimTemplate of their namespace (one claim per pod, count = the member's GPUs), the
    odd ones request `nvidia.com/gpu`. The bound GPU pods alternate the same way and hold their
    devices as the scheduler leaves them: an allocated claim generated from a template (named in
    the pod's `status.resourceClaimStatuses`), or the scheduler's extended-resource claim
    (annotated `resource.kubernetes.io/extended-resource-claim: "true"`, named in the pod's
    `status.extendedResourceClaimStatus`). Whole waiting groups, picked at random until they hold
    10% of the waiting members, carry in turn a required pod anti-affinity on
    `kubernetes.io/hostname` among their group or a DoNotSchedule zone spread constraint
    (maxSkew 1) over their group. Everything goes through a `ClusterIndex` as the controller
    feeds it (nodes, then the device class, slices, templates and claims, then the bound pods and
    the waiting members' pods, whose device rooms the index makes as they arrive), and the pass
    is `plan_pass(groups, index.pool, index.ledger, now, policy, index.occupancy)`.

Before each side's passes the heap is settled as the controller settles it once its caches have
synced (`Controller.settle_memory`: a full collection, then everything alive exempted from later
ones), so that neither side's figure carries a collection of the other's objects.

Both clusters hold the same free GPUs (`*_free_gpus`), so the ratio of the passes is what the
devices and the constraints cost. `cel_evaluations` counts the CEL expressions evaluated over the
build and both passes (answers are remembered per device shape). Everything is seeded.
"""

import random

from bench.planner import GPU, GPU_TOLERATION, TOPOLOGY, _bound_pods, _ledger, _ms, _node_object, _timed, _waiting_group
from gangkeeper import names
from gangkeeper.controller.cache.index import NODES, PODS, Change, ClusterIndex
from gangkeeper.controller.cache.occupancy import (
    DEVICE_CLASSES,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
)
from gangkeeper.controller.checks.eligibility import NodePool
from gangkeeper.controller.model.members import Group, Member, group_of
from gangkeeper.controller.model.nodes import Node
from gangkeeper.controller.planning.queue import QueuePolicy, plan_pass
from gangkeeper.controller.reading.nodes import node_from_api
from gangkeeper.controller.reading.pods import member_from_api, pod_facts
from gangkeeper.controller.runner import Controller

DRIVER = DEVICE_CLASS = "gpu.example.com"
DEVICES_PER_NODE = 8
HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
CLAIM = "gpu"  # the pods' `spec.resourceClaims` entry
EXTENDED_REQUEST = "container-0-request-2"  # the scheduler's name: container 0, its 3rd resource by name
GPU_COUNTS = (1, 2, 4, 8)  # what bound and waiting pods ask for: one template of each per namespace
CONSTRAINED_SHARE = 0.10
ANTI_AFFINITY, SPREAD = "anti-affinity", "spread"
NOW = 1_000.0
POLICY = QueuePolicy(starvation_seconds=600, topology=TOPOLOGY)


def run(nodes: tuple[int, ...] = (500, 5000), bound_pods: int = 50_000, waiting_groups: int = 500) -> dict:
    return {f"nodes={count}": _scenario(count, bound_pods, waiting_groups) for count in nodes}


def _scenario(node_count: int, bound_pods: int, waiting_groups: int) -> dict:
    rng = random.Random(node_count)  # drawn in the planner section's order: the same cluster and groups
    node_objects = [_node_object(i) for i in range(node_count)]
    node_list = [node_from_api(obj) for obj in node_objects]
    bound = _bound_pods(node_list, bound_pods, rng)
    groups = [_waiting_group(i, rng) for i in range(waiting_groups)]
    constrained = _constrained(groups, random.Random(f"constraints-{node_count}"))
    baseline = _baseline(node_list, bound, groups)
    dra = _with_occupancy(node_objects, bound, groups, constrained)
    return {"bound_pods": len(bound), "waiting_members": sum(len(group.members) for group in groups),
            **baseline, **dra,
            "ratio_first": round(dra["dra_first_ms"] / baseline["baseline_first_ms"], 2),
            "ratio_second": round(dra["dra_second_ms"] / baseline["baseline_second_ms"], 2)}


def _baseline(node_list: list[Node], bound: list[tuple[str, Member]], groups: list[Group]) -> dict:
    """The planner section's pass, timed as it is there."""
    build, ledger = _timed(lambda: _ledger(node_list, bound))
    pool = NodePool(node_list)
    Controller.settle_memory()
    first, result = _timed(lambda: plan_pass(groups, pool, ledger, now=NOW, policy=POLICY))
    second, _ = _timed(lambda: plan_pass(groups, pool, ledger, now=NOW, policy=POLICY))
    return {"baseline_build_ms": _ms(build), "baseline_first_ms": _ms(first), "baseline_second_ms": _ms(second),
            "baseline_admitted": len(result.admitted), "baseline_waiting": len(result.waiting),
            "baseline_free_gpus": _free_gpus(ledger, node_list)}


def _with_occupancy(node_objects: list[dict], bound: list[tuple[str, Member]], groups: list[Group],
                    constrained: dict[int, str]) -> dict:
    nodes = [node_from_api(_dra_node(obj)) for obj in node_objects]
    pods, claims = _dra_bound(bound)
    namespaces = sorted({"busy", *(group.key[0] for group in groups)})
    objects = [_device_class(), *(_slice(node.name) for node in nodes),
               *(_template(namespace, gpus) for namespace in namespaces for gpus in GPU_COUNTS), *claims]
    built = [_dra_group(index, group, constrained.get(index)) for index, group in enumerate(groups)]
    dra_groups = [group for group, _ in built]
    facts = [pod_facts(pod) for pod in pods] + [pod_facts(pod) for _, waiting in built for pod in waiting]
    build, index = _timed(lambda: _index(nodes, objects, facts))
    pool = index.pool  # built on first use; outside the passes' time, as the baseline's pool is
    Controller.settle_memory()

    def planned():
        return plan_pass(dra_groups, pool, index.ledger, NOW, POLICY, index.occupancy)

    first, result = _timed(planned)
    second, _ = _timed(planned)
    kinds = list(constrained.values())
    return {"dra_build_ms": _ms(build), "dra_first_ms": _ms(first), "dra_second_ms": _ms(second),
            "dra_admitted": len(result.admitted), "dra_waiting": len(result.waiting),
            "dra_free_gpus": _free_gpus(index.ledger, nodes), "allocated_claims": len(claims),
            "cel_evaluations": index.occupancy.devices.cel_evaluations,
            "constrained_members": sum(len(groups[i].members) for i in constrained),
            "anti_affinity_groups": kinds.count(ANTI_AFFINITY), "spread_groups": kinds.count(SPREAD)}


def _index(nodes: list[Node], objects: list[Change], facts: list) -> ClusterIndex:
    """The index as the controller fills it from its informers."""
    index = ClusterIndex()
    index.apply([(NODES, node.name, node) for node in nodes])
    index.apply(objects)
    index.apply([(PODS, f"{f.member.namespace}/{f.member.name}", f) for f in facts])
    return index


def _free_gpus(ledger, nodes: list[Node]) -> int:
    return sum(int(ledger.free(node.name).get(GPU, 0)) for node in nodes)


def _constrained(groups: list[Group], rng: random.Random) -> dict[int, str]:
    """Whole groups, in random order, until they hold `CONSTRAINED_SHARE` of the waiting members:
    group index → its constraint, anti-affinity and spread in turn."""
    wanted = CONSTRAINED_SHARE * sum(len(group.members) for group in groups)
    order = list(range(len(groups)))
    rng.shuffle(order)
    chosen: dict[int, str] = {}
    members = 0
    for index in order:
        if members >= wanted:
            break
        chosen[index] = (ANTI_AFFINITY, SPREAD)[len(chosen) % 2]
        members += len(groups[index].members)
    return chosen


# --- the cluster's objects ------------------------------------------------------------------


def _dra_node(obj: dict) -> dict:
    """The planner section's node, its GPUs published as devices rather than listed in allocatable."""
    metadata, status = obj["metadata"], obj["status"]
    allocatable = {name: value for name, value in status["allocatable"].items() if name != GPU}
    return {**obj, "metadata": {**metadata, "labels": {**metadata["labels"], HOSTNAME_LABEL: metadata["name"]}},
            "status": {**status, "allocatable": allocatable}}


def _device_class() -> Change:
    return DEVICE_CLASSES, DEVICE_CLASS, {
        "metadata": {"name": DEVICE_CLASS, "creationTimestamp": "2026-01-01T00:00:00+00:00"},
        "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}],
                 "extendedResourceName": GPU}}


def _slice(node_name: str) -> Change:
    name = f"{node_name}-{DRIVER}"
    devices = [{"name": f"gpu-{i}", "attributes": {"productName": {"string": "H100"}, "index": {"int": i}},
                "capacity": {"memory": {"value": "80Gi"}}} for i in range(DEVICES_PER_NODE)]
    return RESOURCE_SLICES, name, {
        "metadata": {"name": name},
        "spec": {"driver": DRIVER, "nodeName": node_name,
                 "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}


def _template(namespace: str, gpus: int) -> Change:
    name = _template_name(gpus)
    return RESOURCE_CLAIM_TEMPLATES, f"{namespace}/{name}", {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [_device_request(CLAIM, gpus)]}}}}


def _template_name(gpus: int) -> str:
    return f"gpus-{gpus}"


def _device_request(name: str, gpus: int) -> dict:
    return {"name": name, "exactly": {"deviceClassName": DEVICE_CLASS, "allocationMode": "ExactCount", "count": gpus}}


def _allocated_claim(pod: dict, name: str, request: str, node_name: str, devices: range, extended: bool) -> Change:
    """A claim as the scheduler leaves it once the pod is bound: allocated on the node, reserved for the pod."""
    metadata = pod["metadata"]
    claim_metadata = {"name": name, "namespace": metadata["namespace"],
                      "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": metadata["name"],
                                           "uid": metadata["uid"], "controller": True}]}
    if extended:
        claim_metadata["annotations"] = {EXTENDED_CLAIM_ANNOTATION: "true"}
    results = [{"request": request, "driver": DRIVER, "pool": node_name, "device": f"gpu-{i}"} for i in devices]
    selector = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                        "values": [node_name]}]}]}
    return RESOURCE_CLAIMS, f"{metadata['namespace']}/{name}", {
        "metadata": claim_metadata,
        "spec": {"devices": {"requests": [_device_request(request, len(devices))]}},
        "status": {"allocation": {"devices": {"results": results}, "nodeSelector": selector},
                   "reservedFor": [{"resource": "pods", "name": metadata["name"], "uid": metadata["uid"]}]}}


def _dra_bound(bound: list[tuple[str, Member]]) -> tuple[list[dict], list[Change]]:
    """The bound pods, their GPU pods alternating template claims and extended resources, and the
    allocated claims holding their devices (each node's devices taken in allocator order)."""
    next_device: dict[str, int] = {}
    pods: list[dict] = []
    claims: list[Change] = []
    for position, (node_name, member) in enumerate(bound):
        gpus = int(member.requests.get(GPU, 0))
        through_template = position % 2 == 0
        pod = _pod(member, gpus, through_template, node_name)
        if gpus:
            first = next_device.get(node_name, 0)
            next_device[node_name] = first + gpus
            devices = range(first, first + gpus)
            if through_template:
                name = f"{member.name}-{CLAIM}"
                pod["status"]["resourceClaimStatuses"] = [{"name": CLAIM, "resourceClaimName": name}]
                claims.append(_allocated_claim(pod, name, CLAIM, node_name, devices, extended=False))
            else:
                name = f"{member.name}-extended-resources-0"
                pod["status"]["extendedResourceClaimStatus"] = {
                    "resourceClaimName": name,
                    "requestMappings": [{"containerName": "main", "resourceName": GPU, "requestName": EXTENDED_REQUEST}]}
                claims.append(_allocated_claim(pod, name, EXTENDED_REQUEST, node_name, devices, extended=True))
        pods.append(pod)
    return pods, claims


def _dra_group(index: int, group: Group, constraint: str | None) -> tuple[Group, list[dict]]:
    """The planner section's group, and its members' pods: GPUs through templates when even,
    extended resources when odd."""
    job = group.key[1]
    pods = [_pod(member, int(member.requests.get(GPU, 0)), index % 2 == 0, None, job, constraint)
            for member in group.members]
    return group_of(group.key, [member_from_api(pod) for pod in pods], group.min_count, group.first_seen), pods


def _pod(member: Member, gpus: int, through_template: bool, node_name: str | None, job: str | None = None,
         constraint: str | None = None) -> dict:
    """The pod behind one of the planner section's members, its GPUs asked for through a claim
    template or as the extended resource, with the group's constraint if it has one."""
    requests = {"cpu": "2", "memory": "16Gi"}
    spec: dict = {"containers": [{"name": "main", "resources": {"requests": requests}}],
                  "tolerations": [GPU_TOLERATION], "priority": member.priority}
    if gpus and through_template:
        spec["resourceClaims"] = [{"name": CLAIM, "resourceClaimTemplateName": _template_name(gpus)}]
        spec["containers"][0]["resources"]["claims"] = [{"name": CLAIM}]
    elif gpus:
        requests[GPU] = str(gpus)
    labels = {}
    if job is not None:
        labels = {names.GROUP_LABEL: job, "job": job}
    if constraint == ANTI_AFFINITY:
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"job": job}}, "topologyKey": HOSTNAME_LABEL}]}}
    elif constraint == SPREAD:
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": ZONE_LABEL,
                                              "whenUnsatisfiable": "DoNotSchedule",
                                              "labelSelector": {"matchLabels": {"job": job}}}]
    if node_name:
        spec["nodeName"] = node_name
    else:
        spec["schedulingGates"] = [{"name": names.SCHEDULING_GATE}]
    return {"metadata": {"name": member.name, "namespace": member.namespace, "uid": member.uid, "labels": labels},
            "spec": spec, "status": {"phase": "Running" if node_name else "Pending"}}


def markdown(figures: dict) -> str:
    """The figures of `run` as the results file shows them: one row per cluster size."""
    header = ("| nodes | bound pods / allocated claims | constrained members (anti-affinity / spread groups) "
              "| build ms (ledger / index) | baseline pass ms (1st / 2nd) | DRA + constraints pass ms (1st / 2nd) "
              "| ratio (1st / 2nd) | admitted / waiting (baseline; DRA) | free GPUs (baseline / DRA) "
              "| CEL evaluations |")
    lines = [header, "|" + "---|" * 10]
    for label, row in figures.items():
        share = 100 * row["constrained_members"] / row["waiting_members"]
        lines.append(
            f"| {label.split('=')[1]} | {row['bound_pods']:,} / {row['allocated_claims']:,} "
            f"| {row['constrained_members']:,} of {row['waiting_members']:,} ({share:.1f}%; "
            f"{row['anti_affinity_groups']} / {row['spread_groups']}) "
            f"| {row['baseline_build_ms']} / {row['dra_build_ms']} "
            f"| {row['baseline_first_ms']} / {row['baseline_second_ms']} "
            f"| {row['dra_first_ms']} / {row['dra_second_ms']} | {row['ratio_first']} / {row['ratio_second']} "
            f"| {row['baseline_admitted']} / {row['baseline_waiting']}; {row['dra_admitted']} / {row['dra_waiting']} "
            f"| {row['baseline_free_gpus']:,} / {row['dra_free_gpus']:,} | {row['cel_evaluations']} |")
    return ("## Occupancy: the planning pass with DRA devices and pod constraints\n\n"
            "`bench/occupancy.py`: the planner section's cluster and 500 waiting gangs, planned as they are "
            "today (baseline) and with each node's 8 GPUs published as a ResourceSlice, half the gangs claiming "
            "them through a ResourceClaimTemplate and half as `nvidia.com/gpu` served by a DeviceClass "
            "(KEP-5004), the bound pods holding allocated claims, and 10% of the waiting members under required "
            "hostname anti-affinity or a DoNotSchedule zone spread, all through a `ClusterIndex`. "
            "Target: the DRA + constraints pass ≤ 1 s at 5,000 nodes; the ratio is to the baseline measured "
            "in the same run.\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
