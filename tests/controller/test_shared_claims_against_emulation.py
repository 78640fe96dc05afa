"""The planner's devices (`checks.dra`) against the emulated scheduler's DynamicResources plugin
(`sim.dra`), which share no code, for groups sharing one ResourceClaim on devices that one node,
a rack of nodes, every node, or each device its own nodes reach.

For small generated clusters whose nodes each hold one pod (so that a group spreads over nodes):
every plan binds in every order the scheduler may bind its members, each pinned to its planned
node, the claim allocated by whichever member comes first (its node selector then admitting the
rest), the members' own claims beside it. A group of one member the planner refuses has no node
the emulated plugin accepts it on.
"""

import copy
from itertools import permutations

from hypothesis import given, settings
from hypothesis import strategies as st

from gangkeeper.controller.cache.index import NODES, ClusterIndex
from gangkeeper.controller.cache.occupancy import DEVICE_CLASSES, RESOURCE_CLAIMS, RESOURCE_SLICES
from gangkeeper.controller.model.members import group_of
from gangkeeper.controller.planning.planner import plan_group
from gangkeeper.controller.planning.plans import NoFit, Topology
from gangkeeper.controller.reading.nodes import node_from_api
from gangkeeper.controller.reading.pods import member_from_api
from sim.cel import environment
from sim.dra import ClaimFilter, DraState
from sim.names import RESOURCE_CLAIMS as SIM_CLAIMS
from sim.placement import node_facts
from tests.controller.builders import node_object, pod_object

DRIVER = "link.example.com"
RACK = "example.com/rack"
NS = "team"
environment()  # celpy raises the recursion limit as it builds one: before the test, not during it
DEVICE_CLASS = {"metadata": {"name": DRIVER}, "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]}}

RACKS = st.lists(st.sampled_from(["r1", "r2"]), min_size=2, max_size=4)
NODE = st.tuples(st.just("nodeName"), st.integers(0, 3))
IN_RACK = st.tuples(st.just("nodeSelector"), st.sampled_from(["r1", "r2"]))
EVERYWHERE = st.tuples(st.just("allNodes"), st.just(True))
REACH = st.one_of(NODE, IN_RACK, IN_RACK, EVERYWHERE)
SLICES = st.lists(st.one_of(st.tuples(REACH, st.integers(1, 3)),
                            st.tuples(st.just(("perDeviceNodeSelection", True)), st.lists(REACH, min_size=1, max_size=2))),
                  min_size=1, max_size=4)
GROUP = st.tuples(st.integers(1, 3), st.sampled_from([1, 2]), st.booleans())  # members, devices shared, one own each


def reach(kind, value, nodes):
    if kind == "nodeName":
        return {"nodeName": nodes[value % len(nodes)]["metadata"]["name"]}
    if kind == "nodeSelector":
        return {"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": RACK, "operator": "In", "values": [value]}]}]}}
    return {kind: value}


def resource_slice(index, spec, nodes):
    (kind, value), devices = spec
    pool = {"name": f"p{index}", "generation": 1, "resourceSliceCount": 1}
    if kind == "perDeviceNodeSelection":
        listed = [{"name": f"d{i}", **reach(*own, nodes)} for i, own in enumerate(devices)]
        return {"metadata": {"name": f"s{index}"}, "spec": {"driver": DRIVER, "pool": pool, kind: True, "devices": listed}}
    return {"metadata": {"name": f"s{index}"}, "spec": {"driver": DRIVER, "pool": pool, **reach(kind, value, nodes),
                                                       "devices": [{"name": f"d{i}"} for i in range(devices)]}}


def claim(name, count, owner=None):
    obj = {"metadata": {"name": name, "namespace": NS},
           "spec": {"devices": {"requests": [{"name": "link", "exactly": {
               "deviceClassName": DRIVER, "allocationMode": "ExactCount", "count": count}}]}}}
    if owner is not None:
        obj["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": owner["metadata"]["name"],
                                               "uid": owner["metadata"]["uid"], "controller": True}]
    return obj


def scenario(racks, slice_specs, group_spec):
    """Nodes, slices, claims and the group's pods: each names the shared claim `link`, and its own
    claim (made from a template, as the claim controller records it) when the group has one each."""
    size, shared, own = group_spec
    nodes = [node_object(f"n{i}", gpus=None, pods=1, labels={RACK: rack}) for i, rack in enumerate(racks)]
    slices = [resource_slice(i, spec, nodes) for i, spec in enumerate(slice_specs)]
    claims = [claim("link", shared)]
    pods = []
    for i in range(size):
        pod = pod_object(f"m{i}", gpus=0)
        pod["spec"]["resourceClaims"] = [{"name": "link", "resourceClaimName": "link"}]
        if own:
            pod["spec"]["resourceClaims"].insert(0, {"name": "own", "resourceClaimTemplateName": "one"})
            pod["status"]["resourceClaimStatuses"] = [{"name": "own", "resourceClaimName": f"m{i}-own"}]
            claims.append(claim(f"m{i}-own", 1, owner=pod))
        pods.append(pod)
    return nodes, slices, claims, pods


def planned(nodes, slices, claims, pods):
    index = ClusterIndex()
    index.apply([(NODES, n["metadata"]["name"], node_from_api(n)) for n in nodes])
    index.apply([(DEVICE_CLASSES, DRIVER, DEVICE_CLASS), *((RESOURCE_SLICES, s["metadata"]["name"], s) for s in slices),
                 *((RESOURCE_CLAIMS, f"{NS}/{c['metadata']['name']}", c) for c in claims)])
    group = group_of((NS, "g"), [member_from_api(pod) for pod in pods], len(pods), 0.0)
    return plan_group(group, index.pool, index.ledger, Topology(), index.occupancy)


class Emulated:
    """The emulated plugin's view of the cluster: pods bound one at a time, each allocating and
    reserving its claims as PreBind writes them."""

    def __init__(self, nodes, slices, claims):
        self.state = DraState()
        self.state.observe("deviceclasses", "ADDED", DEVICE_CLASS)
        for s in slices:
            self.state.observe("resourceslices", "ADDED", s)
        for c in claims:
            self.state.observe(SIM_CLAIMS, "ADDED", copy.deepcopy(c))
        self.facts = {n["metadata"]["name"]: node_facts(n) for n in nodes}

    def refusal(self, pod, name) -> str | None:
        return self._filter(pod, name)[1]

    def bind(self, pod, name) -> str | None:
        """Bind the pod to the node, or say why the plugin refuses it."""
        check, why = self._filter(pod, name)
        if why is not None:
            return why
        for entry, allocation in check.plans[name].claims:
            written = copy.deepcopy(entry.claim)
            status = written.setdefault("status", {})
            if allocation is not None:
                status["allocation"] = allocation
            status["reservedFor"] = [*status.get("reservedFor", ()),
                                     {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}]
            self.state.put_claim(written)
        return None

    def _filter(self, pod, name) -> tuple[ClaimFilter | None, str | None]:
        """PreEnqueue, PreFilter and Filter on the node: the plugin's state and its refusal."""
        prepared = self.state.prepare(pod, {})
        if prepared.waiting or prepared.failure or prepared.check is None:  # every pod here names claims
            return None, prepared.failure or "waiting for its claims"
        return prepared.check, prepared.check.reason(self.facts[name])


@settings(max_examples=400, deadline=None)
@given(RACKS, SLICES, GROUP)
def test_every_plan_binds_in_every_order_and_no_single_member_refused_has_a_node(racks, slice_specs, group_spec):
    nodes, slices, claims, pods = scenario(racks, slice_specs, group_spec)
    result = planned(nodes, slices, claims, pods)
    by_uid = {pod["metadata"]["uid"]: pod for pod in pods}
    if isinstance(result, NoFit):
        if len(pods) == 1:
            emulated = Emulated(nodes, slices, claims)
            assert all(emulated.refusal(pods[0], name) for name in emulated.facts), result.reason
        return
    for order in permutations(result.assignments):
        emulated = Emulated(nodes, slices, claims)
        for member, name in order:
            why = emulated.bind(by_uid[member.uid], name)
            assert why is None, ([(m.name, n) for m, n in order], member.name, name, why)
