import json
from dataclasses import replace
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gangkeeper.controller.cache.capacity import Ledger, members_fitting, usage
from gangkeeper.controller.checks.dra import allocator
from gangkeeper.controller.checks.dra.allocator import CANNOT_ALLOCATE, NOT_AVAILABLE
from gangkeeper.controller.checks.dra.demand import EXTENDED_CLAIM_NAME, IN_USE, MAX_RESERVED_FOR, device_demand
from gangkeeper.controller.checks.dra.devices import allocation_reach, placement
from gangkeeper.controller.checks.dra.inventory import Inventory
from gangkeeper.controller.model.claims import ALL, Claim, DeviceRequest, MatchAttribute, Unresolved
from gangkeeper.controller.model.nodes import Toleration
from gangkeeper.controller.model.selectors import Requirement, Term
from gangkeeper.controller.reading.nodes import node_from_api
from gangkeeper.controller.reading.pods import pinned_node, required_affinity_terms
from gangkeeper.names import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from gangkeeper.resources import pod_requests
from tests import builders
from tests.controller.builders import node_object
from tests.recorded import SCHEDULER

DRIVER = "gpu.example.com"
GPU_CLASS = "gpu.example.com"
BY_DRIVER = f"device.driver == '{DRIVER}'"
H100 = f"device.attributes['{DRIVER}'].model == 'h100'"
NAMESPACE = "team"


# --- builders: API objects as plain dicts ----------------------------------------------------------


def device_class(name=GPU_CLASS, selectors=(BY_DRIVER,), extended_resource=None, created=None):
    spec = {"selectors": [{"cel": {"expression": e}} for e in selectors]}
    if extended_resource:
        spec["extendedResourceName"] = extended_resource
    metadata = {"name": name}
    if created:
        metadata["creationTimestamp"] = created
    return {"kind": "DeviceClass", "metadata": metadata, "spec": spec}


def gpu(name, model=None, **extra):
    raw = {"name": name, **extra}
    if model:
        raw.setdefault("attributes", {})["model"] = {"string": model}
    return raw


def gpus(count, model=None):
    return [gpu(f"gpu-{i}", model) for i in range(count)]


def resource_slice(name, devices, node="n1", pool=None, generation=1, slices_in_pool=1, driver=DRIVER, **placement):
    spec = {"driver": driver, "devices": devices,
            "pool": {"name": pool or node or name, "generation": generation, "resourceSliceCount": slices_in_pool}}
    if placement:
        spec.update(placement)
    else:
        spec["nodeName"] = node
    return {"kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def request(name="gpu", count=1, selectors=(), device_class=GPU_CLASS, mode="ExactCount", **extra):
    exactly = {"deviceClassName": device_class, "allocationMode": mode, "count": count, **extra}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": name, "exactly": exactly}


def claim_object(name, requests, results=None, node=None, reserved_for=(), annotations=None, constraints=None):
    devices = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    metadata = {"name": name, "namespace": NAMESPACE, "annotations": annotations or {}}
    obj = {"kind": "ResourceClaim", "metadata": metadata,
           "spec": {"devices": devices}, "status": {}}
    if results is not None:
        obj["status"]["allocation"] = allocation(results, node)
        obj["status"]["reservedFor"] = [{"resource": "pods", "name": uid, "uid": uid} for uid in reserved_for]
    return obj


def allocation(results, node):
    """As the scheduler writes it: one result per device, restricted to the node of node-local devices."""
    written = {"devices": {"results": [{"request": request, "driver": driver, "pool": pool, "device": name}
                                       for request, (driver, pool, name) in results]}}
    if node:
        written["nodeSelector"] = {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}
    return written


def template_object(name, requests):
    return {"kind": "ResourceClaimTemplate", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"spec": {"devices": {"requests": list(requests)}}}}


def pod_object(name, templates=(), shared=(), statuses=None, uid=None):
    claims = [{"name": f"t{i}", "resourceClaimTemplateName": t} for i, t in enumerate(templates)]
    claims += [{"name": f"s{i}", "resourceClaimName": s} for i, s in enumerate(shared)]
    pod = builders.pod(name, namespace=NAMESPACE, uid=uid or f"uid-{name}", resourceClaims=claims)
    pod["status"] = {} if statuses is None else {"resourceClaimStatuses": statuses}
    return pod


def node(name="n1", labels=None, allocatable=None):
    obj = node_object(name, gpus=None, labels=labels)
    obj["status"]["allocatable"].update(allocatable or {})
    return node_from_api(obj)


def inventory(*objects):
    inv = Inventory()
    for obj in objects:
        {"DeviceClass": inv.put_device_class, "ResourceSlice": inv.put_slice,
         "ResourceClaim": inv.put_claim}[obj["kind"]](obj)
    return inv


def demand(pod, *objects):
    by_key = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objects}
    templates = {k: o for k, o in by_key.items() if o["kind"] == "ResourceClaimTemplate"}
    claims = {k: o for k, o in by_key.items() if o["kind"] == "ResourceClaim"}
    return device_demand(pod, templates, claims)


def one_claim(*requests, constraints=(), shared=None):
    """A pod's demand of one claim, built directly."""
    return (Claim("gpu", tuple(requests), tuple(constraints), shared),)


def devices_of(results):
    return [result.device[2] for claim in results for result in claim]


def any_gpu(count=1, name="gpu", **kwargs):
    return DeviceRequest(name, GPU_CLASS, count=count, **kwargs)


def h100(count=1, name="h100"):
    return DeviceRequest(name, GPU_CLASS, (H100,), count=count)


# --- what a pod asks for -------------------------------------------------------------------------


def test_a_pod_without_claims_demands_nothing():
    assert demand(pod_object("p")) == ()


def test_a_template_gives_the_pod_its_own_claim():
    template = template_object("two", [request(count=2, selectors=(H100,))])
    (claim,) = demand(pod_object("p", templates=["two"]), template)
    assert claim.shared is None and claim.allocation is None and claim.name == "t0"
    assert claim.requests == (DeviceRequest("gpu", GPU_CLASS, (H100,), 2),)


def test_identical_members_share_one_demand():
    template = template_object("one", [request()])
    first, second = (demand(pod_object(name, templates=["one"]), template) for name in ("a", "b"))
    assert first is second


def test_a_missing_template_or_claim_is_a_reason_not_a_demand():
    assert demand(pod_object("p", templates=["nope"])) == Unresolved(
        'resourceclaimtemplate.resource.k8s.io "nope" not found')
    assert demand(pod_object("p", shared=["gone"])) == Unresolved('resourceclaim.resource.k8s.io "gone" not found')


def test_a_generated_claim_already_allocated_is_demanded_as_its_allocation():
    generated = claim_object("p-t0-abcde", [request()], results=[("gpu", (DRIVER, "n1", "gpu-3"))], node="n1")
    pod = pod_object("p", templates=["one"], statuses=[{"name": "t0", "resourceClaimName": "p-t0-abcde"}])
    (claim,) = demand(pod, generated, template_object("one", [request()]))
    assert [r.device for r in claim.allocation.results] == [(DRIVER, "n1", "gpu-3")]


def test_a_template_entry_the_claim_controller_left_without_claim_is_skipped():
    pod = pod_object("p", templates=["one"], statuses=[{"name": "t0", "resourceClaimName": None}])
    assert demand(pod, template_object("one", [request()])) == ()


def test_a_shared_claim_is_known_by_its_key():
    (claim,) = demand(pod_object("p", shared=["shared"]), claim_object("shared", [request()]))
    assert claim.shared == (NAMESPACE, "shared")


def test_first_available_and_constraints_are_read():
    first_available = {"name": "gpu", "firstAvailable": [
        {"name": "big", "deviceClassName": GPU_CLASS, "count": 4},
        {"name": "small", "deviceClassName": GPU_CLASS, "allocationMode": "ExactCount", "count": 1}]}
    shared = claim_object("c", [first_available], constraints=[{"matchAttribute": f"{DRIVER}/numa"}])
    (claim,) = demand(pod_object("p", shared=["c"]), shared)
    assert [(s.name, s.count) for s in claim.requests[0].first_available] == [("big", 4), ("small", 1)]
    assert claim.constraints == (MatchAttribute(f"{DRIVER}/numa"),)


def test_a_constraint_the_allocator_does_not_know_is_a_reason():
    shared = claim_object("c", [request()], constraints=[{"distinctAttribute": f"{DRIVER}/numa"}])
    reason = demand(pod_object("p", shared=["c"]), shared)
    assert isinstance(reason, Unresolved) and "only matchAttribute" in reason.reason


def test_a_claim_reserved_for_as_many_other_pods_as_allowed_is_in_use():
    full = claim_object("c", [request()], results=[("gpu", (DRIVER, "n1", "gpu-0"))], node="n1",
                        reserved_for=[f"other-{i}" for i in range(MAX_RESERVED_FOR)])
    assert demand(pod_object("p", shared=["c"]), full) == Unresolved(IN_USE)
    mine = claim_object("c", [request()], results=[("gpu", (DRIVER, "n1", "gpu-0"))], node="n1",
                        reserved_for=["uid-p"] + [f"other-{i}" for i in range(MAX_RESERVED_FOR - 1)])
    assert not isinstance(demand(pod_object("p", shared=["c"]), mine), Unresolved)


# --- the allocator --------------------------------------------------------------------------------


def test_devices_go_in_slice_order_and_the_next_pod_gets_the_next_ones():
    inv = inventory(device_class(), resource_slice("s", gpus(5)))
    wanted = one_claim(any_gpu(2))
    assert devices_of(inv.hold("a", node(), wanted)) == ["gpu-0", "gpu-1"]
    assert devices_of(inv.hold("b", node(), wanted)) == ["gpu-2", "gpu-3"]
    assert inv.allocate(node(), wanted) is None
    assert inv.refusal(node(), wanted) == CANNOT_ALLOCATE
    assert inv.fits(node(), one_claim(any_gpu(1)), 8) == 1


def test_a_claim_without_requests_needs_no_device():
    # The API: "If empty, nothing needs to be allocated." It used to have no result at all, and
    # counting the pod's devices on a node failed on it (found by the type check).
    inv = inventory(device_class(), resource_slice("s", gpus(1)))
    nothing = Claim("nothing", ())
    assert inv.allocate(node(), (nothing,)) == ((),)
    assert inv.fits(node(), (nothing,), 3) == 3
    assert devices_of(inv.hold("a", node(), (Claim("gpu", (any_gpu(),)), nothing))) == ["gpu-0"]
    assert inv.refusal(node(), (nothing,)) is None


def test_a_pod_backtracks_until_every_request_of_every_claim_has_a_device():
    inv = inventory(device_class(), resource_slice("s", [gpu("gpu-0", "h100"), gpu("gpu-1", "a100")]))
    within_a_claim = one_claim(any_gpu(name="any"), h100())
    (results,) = inv.allocate(node(), within_a_claim)
    assert [(r.request, r.device[2]) for r in results] == [("any", "gpu-1"), ("h100", "gpu-0")]
    across_claims = (Claim("first", (any_gpu(),)), Claim("second", (h100(),)))
    assert devices_of(inv.allocate(node(), across_claims)) == ["gpu-1", "gpu-0"]


def test_all_mode_takes_every_matching_device_or_none():
    inv = inventory(device_class(), resource_slice("s", [gpu("gpu-0", "h100"), gpu("gpu-1", "a100"),
                                                         gpu("gpu-2", "h100")]))
    every_h100 = one_claim(DeviceRequest("all", GPU_CLASS, (H100,), mode=ALL))
    assert devices_of(inv.allocate(node(), every_h100)) == ["gpu-0", "gpu-2"]
    inv.hold("other", node(), one_claim(h100()))
    assert inv.refusal(node(), every_h100) == CANNOT_ALLOCATE


def test_class_and_request_selectors_must_both_hold():
    other_driver = resource_slice("nic", [{"name": "nic-0"}], pool="nics", driver="nic.example.com")
    inv = inventory(device_class(), other_driver, resource_slice("s", [gpu("gpu-0", "a100"), gpu("gpu-1", "h100")]))
    assert devices_of(inv.allocate(node(), one_claim(h100()))) == ["gpu-1"]
    assert inv.fits(node(), one_claim(any_gpu()), 10) == 2


@pytest.mark.parametrize("selector, chosen", [
    ("device.attributes['gpu.example.com'].memory >= 80", ["gpu-1"]),  # unqualified: the driver's domain
    ("'family' in device.attributes['vendor.example.com'] && "
     "device.attributes['vendor.example.com'].family == 'hopper'", ["gpu-1"]),  # another domain, qualified
    ("size(device.attributes['nowhere.example.com']) == 0", ["gpu-0", "gpu-1"]),  # an unknown domain is empty
    ("device.capacity['gpu.example.com'].hbm.compareTo(quantity('64Gi')) > 0", ["gpu-1"]),
    ("device.capacity['gpu.example.com'].hbm.isLessThan(quantity('64Gi'))", ["gpu-0"]),
    ("device.attributes['gpu.example.com'].driverVersion.isGreaterThan(semver('1.10.0'))", ["gpu-1"]),
    ("device.attributes['gpu.example.com'].driverVersion == semver('1.2.0')", ["gpu-0"]),
    ("device.attributes['gpu.example.com'].model.lowerAscii() == 'h100'", ["gpu-1"]),
    ("isSemver('1.2.3') && !isQuantity('lots') && device.attributes['gpu.example.com'].ecc", ["gpu-1"]),
])
def test_cel_sees_the_device_as_the_dra_environment_does(selector, chosen):
    small = gpu("gpu-0", attributes={"memory": {"int": 40}, "driverVersion": {"version": "1.2.0"},
                                     "ecc": {"bool": False}, "model": {"string": "A100"}},
                capacity={"hbm": {"value": "40Gi"}})
    big = gpu("gpu-1", attributes={"memory": {"int": 80}, "vendor.example.com/family": {"string": "hopper"},
                                   "driverVersion": {"version": "1.10.1"}, "ecc": {"bool": True},
                                   "model": {"string": "H100"}},
              capacity={"hbm": {"value": "80Gi"}})
    inv = inventory(device_class(), resource_slice("s", [small, big]))
    wanted = one_claim(DeviceRequest("gpu", GPU_CLASS, (selector,), mode=ALL))
    assert devices_of(inv.allocate(node(), wanted)) == chosen


@pytest.mark.parametrize("selector, error", [
    ("device.driver ==", "CEL compile error"),
    ("device.attributes['gpu.example.com'].missing == 1", "CEL runtime error: no such member"),
    ("device.driver", "could not be converted to bool"),
    ("cel.bind(x, 1, x == 1)", "CEL runtime error"),
])
def test_a_broken_expression_refuses_the_node_and_says_why(selector, error):
    inv = inventory(device_class(), resource_slice("s", gpus(2, "h100")))
    wanted = one_claim(DeviceRequest("gpu", GPU_CLASS, (selector,)))
    reason = inv.refusal(node(), wanted)
    assert reason.startswith("claim gpu, request gpu: request: selector #0: ") and error in reason
    assert "gpu.example.com/n1/gpu-0" in reason
    assert inv.allocate(node(), wanted) is None and inv.fits(node(), wanted, 2) == 0


def test_a_broken_class_selector_names_the_class():
    inv = inventory(device_class(selectors=("device.nope.x",)), resource_slice("s", gpus(1)))
    assert "class gpu.example.com: selector #0: CEL runtime error" in inv.refusal(node(), one_claim(any_gpu()))


def test_an_unknown_device_class_is_the_reason():
    inv = inventory(resource_slice("s", gpus(1)))
    assert inv.refusal(node(), one_claim(any_gpu())) == "request gpu: device class gpu.example.com does not exist"


def test_untolerated_taints_keep_a_device_out():
    tainted = gpu("gpu-0", taints=[{"key": "broken", "value": "ecc", "effect": "NoSchedule"}])
    preferred = gpu("gpu-1", taints=[{"key": "old", "effect": "None"}])
    inv = inventory(device_class(), resource_slice("s", [tainted, preferred]))
    assert inv.fits(node(), one_claim(any_gpu()), 5) == 1
    tolerant = any_gpu(2, tolerations=(Toleration("broken", "Equal", "ecc", "NoSchedule"),))
    assert devices_of(inv.allocate(node(), one_claim(tolerant))) == ["gpu-0", "gpu-1"]


def test_devices_the_model_cannot_count_are_never_chosen():
    partition = gpu("gpu-0", consumesCounters=[{"counterSet": "mem", "counters": {"memory": {"value": "10Gi"}}}])
    conditional = gpu("gpu-1", bindingConditions=["attached"])
    inv = inventory(device_class(), resource_slice("s", [partition, conditional, gpu("gpu-2")]))
    assert devices_of(inv.allocate(node(), one_claim(any_gpu()))) == ["gpu-2"]
    assert inv.fits(node(), one_claim(any_gpu()), 5) == 1


def test_only_the_newest_generation_of_a_pool_counts():
    inv = inventory(device_class(), resource_slice("old", gpus(8), pool="p", generation=1),
                    resource_slice("new", gpus(2), pool="p", generation=2))
    assert inv.fits(node(), one_claim(any_gpu()), 10) == 2
    inv.remove_slice("new")
    assert inv.fits(node(), one_claim(any_gpu()), 10) == 8


def test_a_pool_spread_over_slices_is_used_whole_and_skipped_while_incomplete():
    first = resource_slice("s-1", [gpu("gpu-0"), gpu("gpu-1")], pool="p", slices_in_pool=2)
    inv = inventory(device_class(), first)
    assert inv.fits(node(), one_claim(any_gpu()), 10) == 0
    every = one_claim(DeviceRequest("gpu", GPU_CLASS, mode=ALL))
    assert "asks for all devices, but resource pool gpu.example.com/p is currently being updated" in inv.refusal(
        node(), every)
    inv.put_slice(resource_slice("s-0", [gpu("gpu-2")], pool="p", slices_in_pool=2))
    assert devices_of(inv.allocate(node(), every)) == ["gpu-2", "gpu-0", "gpu-1"]


def test_a_pool_with_a_device_named_twice_is_skipped():
    inv = inventory(device_class(), resource_slice("s-0", gpus(1), pool="p", slices_in_pool=2),
                    resource_slice("s-1", gpus(1), pool="p", slices_in_pool=2))
    assert inv.fits(node(), one_claim(any_gpu()), 10) == 0


def test_slices_for_all_nodes_or_a_node_selector_are_shared_by_the_nodes_they_admit():
    rack = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]}
    inv = inventory(device_class(), resource_slice("fabric", gpus(1), node=None, pool="fabric", allNodes=True),
                    resource_slice("rack", [gpu("rgpu-0")], node=None, pool="rack", nodeSelector=rack))
    in_rack, elsewhere = node("n1", labels={"rack": "r1"}), node("n2", labels={"rack": "r2"})
    assert inv.fits(in_rack, one_claim(any_gpu()), 5) == 2
    assert inv.fits(elsewhere, one_claim(any_gpu()), 5) == 1
    inv.hold("a", elsewhere, one_claim(any_gpu()))
    assert devices_of(inv.allocate(in_rack, one_claim(any_gpu()))) == ["rgpu-0"]


def test_per_device_node_selection():
    devices = [{"name": "gpu-0", "nodeName": "n1"}, {"name": "gpu-1", "nodeName": "n2"},
               {"name": "gpu-2", "allNodes": True}]
    inv = inventory(device_class(), resource_slice("s", devices, node=None, pool="p", perDeviceNodeSelection=True))
    assert devices_of(inv.allocate(node("n2"), one_claim(any_gpu(2)))) == ["gpu-1", "gpu-2"]
    assert inv.fits(node("n3"), one_claim(any_gpu()), 5) == 1


def test_match_attribute_keeps_a_claims_devices_together():
    numa = [gpu(f"gpu-{i}", attributes={"numa": {"int": i % 2}}) for i in range(4)]
    inv = inventory(device_class(), resource_slice("s", numa))
    together = one_claim(any_gpu(2), constraints=[MatchAttribute(f"{DRIVER}/numa")])
    assert devices_of(inv.allocate(node(), together)) == ["gpu-0", "gpu-2"]
    assert devices_of(inv.allocate(node(), together, taken={(DRIVER, "n1", "gpu-0")})) == ["gpu-1", "gpu-3"]
    unrelated = one_claim(any_gpu(2), constraints=[MatchAttribute(f"{DRIVER}/numa", ("other",))])
    assert devices_of(inv.allocate(node(), unrelated)) == ["gpu-0", "gpu-1"]


def test_first_available_takes_the_first_subrequest_that_can_be_satisfied():
    inv = inventory(device_class(), resource_slice("s", gpus(2)))
    choice = DeviceRequest("gpu", first_available=(any_gpu(4, name="big"), any_gpu(1, name="small")))
    (results,) = inv.allocate(node(), one_claim(choice))
    assert [(r.request, r.device[2]) for r in results] == [("gpu/small", "gpu-0")]


def test_admin_access_uses_devices_in_use_and_takes_none():
    inv = inventory(device_class(), resource_slice("s", gpus(1)))
    inv.hold("user", node(), one_claim(any_gpu()))
    monitor = one_claim(any_gpu(admin_access=True))
    (results,) = inv.hold("monitor", node(), monitor)
    assert results[0].admin_access and results[0].device[2] == "gpu-0"
    inv.forget("user")
    assert inv.fits(node(), one_claim(any_gpu()), 5) == 1


def test_a_claim_gets_at_most_32_devices():
    inv = inventory(device_class(), resource_slice("s", gpus(40)))
    assert "exceeds the claim limit of 32" in inv.refusal(node(), one_claim(any_gpu(33)))
    assert inv.fits(node(), one_claim(any_gpu(33)), 1) == 0


def test_a_search_too_large_to_predict_is_refused(monkeypatch):
    monkeypatch.setattr(allocator, "MAX_STEPS", 3)
    inv = inventory(device_class(), resource_slice("s", gpus(8)))
    assert inv.refusal(node(), one_claim(any_gpu(8))).startswith("more than 3 devices to try")


def test_the_first_free_devices_are_the_searchs_answer_for_a_plain_request(monkeypatch):
    """The shortcut for one plain request gives what the backtracking search gives."""
    inventory(device_class(), resource_slice("s", gpus(1))).allocate(node(), one_claim(any_gpu()))  # CEL set up once

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.sampled_from([None, "h100", "a100"]), min_size=1, max_size=10), st.integers(0, 11),
           st.sets(st.integers(0, 9)), st.booleans())
    def agree(models, count, busy, picky):
        inv = inventory(device_class(), resource_slice("s", [gpu(f"gpu-{i}", m) for i, m in enumerate(models)]))
        taken = {(DRIVER, "n1", f"gpu-{i}") for i in busy}
        asked = one_claim(h100(count) if picky else any_gpu(count))
        shortcut = (inv.allocate(node(), asked, taken), inv.refusal(node(), asked, taken))
        with monkeypatch.context() as patched:
            patched.setattr(allocator, "first_free", lambda *args: None)
            assert (inv.allocate(node(), asked, taken), inv.refusal(node(), asked, taken)) == shortcut

    agree()


# --- the inventory, one event at a time -----------------------------------------------------------


def test_allocated_claims_take_their_devices_until_removed_or_changed():
    inv = inventory(device_class(), resource_slice("s", gpus(2)))
    inv.put_claim(claim_object("c", [request()], results=[("gpu", (DRIVER, "n1", "gpu-0"))], node="n1"))
    assert devices_of(inv.allocate(node(), one_claim(any_gpu()))) == ["gpu-1"]
    inv.put_claim(claim_object("c", [request()], results=[("gpu", (DRIVER, "n1", "gpu-1"))], node="n1"))
    assert devices_of(inv.allocate(node(), one_claim(any_gpu()))) == ["gpu-0"]
    inv.remove_claim(NAMESPACE, "c")
    assert inv.fits(node(), one_claim(any_gpu()), 5) == 2


def test_slices_and_classes_come_and_go():
    inv = inventory(device_class(), resource_slice("s", gpus(2)))
    inv.put_slice(resource_slice("s", gpus(3)))
    assert inv.fits(node(), one_claim(any_gpu()), 5) == 3
    inv.remove_slice("s")
    assert inv.fits(node(), one_claim(any_gpu()), 5) == 0
    inv.put_slice(resource_slice("s", gpus(1)))
    inv.remove_device_class(GPU_CLASS)
    assert inv.fits(node(), one_claim(any_gpu()), 5) == 0


def test_a_slice_moved_to_another_pool_leaves_the_old_one():
    inv = inventory(device_class(), resource_slice("s", gpus(2), pool="a"))
    inv.put_slice(resource_slice("s", gpus(2), pool="b"))
    assert [r.device[1] for r in inv.allocate(node(), one_claim(any_gpu(2)))[0]] == ["b", "b"]


def test_a_hold_that_does_not_fit_holds_nothing_and_forget_gives_devices_back():
    inv = inventory(device_class(), resource_slice("s", gpus(2)))
    assert inv.hold("big", node(), one_claim(any_gpu(3))) is None and inv.held("big") is None
    inv.hold("a", node(), one_claim(any_gpu(2)))
    assert inv.held("a") == "n1" and inv.fits(node(), one_claim(any_gpu()), 5) == 0
    inv.forget("a")
    inv.forget("never-held")
    assert inv.fits(node(), one_claim(any_gpu()), 5) == 2


def test_holding_a_member_again_replaces_its_hold():
    inv = inventory(device_class(), resource_slice("s1", gpus(2), node="n1"), resource_slice("s2", gpus(2), node="n2"))
    inv.hold("a", node("n1"), one_claim(any_gpu(2)))
    inv.hold("a", node("n2"), one_claim(any_gpu(2)))
    assert inv.fits(node("n1"), one_claim(any_gpu()), 5) == 2 and inv.fits(node("n2"), one_claim(any_gpu()), 5) == 0


def test_a_copy_and_its_source_change_apart():
    source = inventory(device_class(), resource_slice("s", gpus(4)))
    source.hold("a", node(), one_claim(any_gpu()))
    trial = source.copy()
    trial.hold("b", node(), one_claim(any_gpu(2)))
    trial.put_slice(resource_slice("extra", gpus(1), pool="extra"))
    source.put_claim(claim_object("c", [request()], results=[("gpu", (DRIVER, "n1", "gpu-3"))], node="n1"))
    assert source.fits(node(), one_claim(any_gpu()), 9) == 2
    assert trial.fits(node(), one_claim(any_gpu()), 9) == 2
    trial.forget("a")
    assert source.held("a") == "n1" and trial.held("a") is None
    assert trial.fits(node(), one_claim(any_gpu()), 9) == 3


# --- shared claims ----------------------------------------------------------------------------------


def two_nodes_one_shared_claim(**claim):
    return inventory(device_class(), resource_slice("s1", gpus(1), node="n1"), resource_slice("s2", gpus(1), node="n2"),
                     claim_object("shared", [request()], **claim))


def test_an_unallocated_shared_claim_is_allocated_by_its_first_holder_and_binds_the_rest_to_that_node():
    inv = two_nodes_one_shared_claim()
    (shared,) = demand(pod_object("p", shared=["shared"]), claim_object("shared", [request()]))
    wanted = (shared,)
    assert devices_of(inv.hold("a", node("n1"), wanted)) == ["gpu-0"]
    assert devices_of(inv.hold("b", node("n1"), wanted)) == ["gpu-0"]
    assert inv.refusal(node("n2"), wanted) == NOT_AVAILABLE
    assert inv.fits(node("n1"), one_claim(any_gpu()), 5) == 0
    inv.forget("a")
    assert inv.refusal(node("n2"), wanted) == NOT_AVAILABLE
    inv.forget("b")
    assert inv.fits(node("n1"), one_claim(any_gpu()), 5) == 1 and inv.refusal(node("n2"), wanted) is None


def test_members_sharing_a_claim_count_its_devices_once():
    inv = two_nodes_one_shared_claim()
    (shared,) = demand(pod_object("p", shared=["shared"]), claim_object("shared", [request()]))
    assert inv.fits(node("n1"), (shared,), 3) == 3
    assert inv.colocatable(node("n1"), [(shared,)] * 3) is None


def test_an_allocated_shared_claim_admits_only_its_node_and_takes_nothing_new():
    inv = two_nodes_one_shared_claim(results=[("gpu", (DRIVER, "n2", "gpu-0"))], node="n2", reserved_for=["x"])
    wanted = demand(pod_object("p", shared=["shared"]), claim_object("shared", [request()]))
    assert inv.refusal(node("n1"), wanted) == NOT_AVAILABLE and inv.fits(node("n1"), wanted, 3) == 0
    assert inv.fits(node("n2"), wanted, 3) == 3
    assert inv.hold("p", node("n2"), wanted) is not None
    assert inv.fits(node("n2"), one_claim(any_gpu()), 5) == 0 and inv.fits(node("n1"), one_claim(any_gpu()), 5) == 1


def test_a_claim_allocated_without_node_restriction_is_available_everywhere():
    inv = two_nodes_one_shared_claim(results=[("gpu", (DRIVER, "n2", "gpu-0"))])
    wanted = demand(pod_object("p", shared=["shared"]), claim_object("shared", [request()]))
    assert inv.refusal(node("n1"), wanted) is None


# --- devices several nodes reach ---------------------------------------------------------------------

RACK = "example.com/rack"


def in_rack(rack):
    return {"nodeSelectorTerms": [{"matchExpressions": [{"key": RACK, "operator": "In", "values": [rack]}]}]}


def racked(name, rack):
    return node(name, labels={RACK: rack})


def shared_link(*slices):
    """An inventory of these slices and an unallocated claim `link` on one device, and the demand of a pod sharing it."""
    link = claim_object("link", [request()])
    return inventory(device_class(), *slices, link), demand(pod_object("p", shared=["link"]), link)


def test_an_allocation_admits_the_nodes_its_devices_all_reach_as_the_allocator_writes_its_node_selector():
    zone = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}],
                                   "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]}]}
    same_zone = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b", "a"]}]}]}
    everywhere, local = placement({"allNodes": True}), placement({"nodeName": "n1"})
    rack, zoned, rezoned = (placement({"nodeSelector": s}) for s in (in_rack("r1"), zone, same_zone))
    assert allocation_reach([everywhere]) is None
    (term,) = allocation_reach([everywhere, zoned, rack, rezoned])
    assert [(r.key, r.values) for r in term.match_expressions] == [(RACK, ("r1",)), ("zone", ("a", "b"))]
    assert [(r.key, r.operator) for r in term.match_fields] == [("metadata.name", "NotIn")]
    assert allocation_reach([rack, local]) == (Term((), (Requirement("metadata.name", "In", ("n1",)),)),)


def test_a_shared_claim_on_a_device_a_rack_reaches_lets_its_members_onto_every_node_of_the_rack():
    inv, wanted = shared_link(resource_slice("r1", [gpu("link-0")], node=None, pool="r1", nodeSelector=in_rack("r1")))
    assert inv.refusal(racked("n9", "r2"), wanted) == CANNOT_ALLOCATE
    assert devices_of(inv.hold("a", racked("n1", "r1"), wanted)) == ["link-0"]
    assert devices_of(inv.hold("b", racked("n2", "r1"), wanted)) == ["link-0"]
    assert inv.refusal(racked("n9", "r2"), wanted) == NOT_AVAILABLE
    inv.forget("a")
    assert inv.fits(racked("n3", "r1"), wanted, 4) == 4


def test_a_shared_claim_whose_devices_on_a_node_reach_different_nodes_is_joined_on_that_node_only():
    """A rack's device and the fabric's: a node of the rack reaches both, and the allocator takes
    pools in no fixed order, so a claim allocated there admits the rack or every node as it falls."""
    inv, wanted = shared_link(resource_slice("rack", [gpu("link-r")], node=None, pool="a-rack", nodeSelector=in_rack("r1")),
                              resource_slice("fabric", [gpu("link-f")], node=None, pool="b-fabric", allNodes=True))
    inside, outside = racked("n1", "r1"), racked("n9", "r2")
    assert devices_of(inv.hold("first", inside, wanted)) == ["link-r"]
    assert inv.refusal(racked("n2", "r1"), wanted) == (
        "claim s0 may be allocated devices that reach different nodes on n1, its first member's node, as the "
        "allocator's order falls")
    assert inv.fits(inside, wanted, 3) == 3  # there, either device admits it
    inv.forget("first")
    assert devices_of(inv.hold("first", outside, wanted)) == ["link-f"]  # admits every node...
    assert inv.refusal(inside, wanted) == allocator.OTHER_NODES.format(claim="s0")  # ...unless n1 binds first
    assert inv.refusal(racked("n8", "r3"), wanted) is None
    inv, wanted = shared_link(resource_slice("fabric", [gpu("link-f")], node=None, pool="a-fabric", allNodes=True),
                              resource_slice("rack", [gpu("link-r")], node=None, pool="b-rack", nodeSelector=in_rack("r1")))
    assert devices_of(inv.hold("first", outside, wanted)) == ["link-f"]
    assert inv.refusal(inside, wanted) == allocator.MIXED_REACH.format(claim="s0", where="here")  # link-f, in this order


def test_a_member_joins_a_shared_claim_only_where_bound_first_its_allocation_would_admit_the_same_nodes():
    """Each rack's nodes reach the rack's device, and every node the fabric's, which another claim
    holds: a group sharing `link` is held to rack r1. Once the fabric's device is freed, another
    node of the rack, bound first, would take it (its pool comes first) and admit every node: the
    claim held for r1 is not joined there."""
    fabric = claim_object("fabric", [request()], results=[("gpu", (DRIVER, "fabric", "link-f"))])
    inv, wanted = shared_link(resource_slice("r1", [gpu("link-1")], node=None, pool="r1", nodeSelector=in_rack("r1")),
                              resource_slice("r2", [gpu("link-2")], node=None, pool="r2", nodeSelector=in_rack("r2")),
                              resource_slice("fabric", [gpu("link-f")], node=None, pool="fabric", allNodes=True),
                              fabric)
    assert devices_of(inv.hold("first", racked("n1", "r1"), wanted)) == ["link-1"]
    assert inv.refusal(racked("n2", "r1"), wanted) is None
    assert inv.refusal(racked("n5", "r2"), wanted) == NOT_AVAILABLE
    inv.remove_claim(NAMESPACE, "fabric")
    assert inv.refusal(racked("n2", "r1"), wanted) == allocator.OTHER_NODES.format(claim="s0")


def test_the_devices_of_a_holders_own_claims_are_free_were_another_member_bound_first():
    """Each member takes one device of its own and shares `link`, all from one fabric: whoever binds
    first takes gpu-0 for itself and gpu-1 for the claim, and the other then takes gpu-2."""
    fabric = resource_slice("fabric", gpus(3), node=None, pool="fabric", allNodes=True)
    link = claim_object("link", [request()])
    inv = inventory(device_class(), fabric, link)
    wanted = demand(pod_object("p", templates=["one"], shared=["link"]), link, template_object("one", [request()]))
    assert devices_of(inv.hold("a", node("n1"), wanted)) == ["gpu-0", "gpu-1"]
    assert devices_of(inv.hold("b", node("n2"), wanted)) == ["gpu-2", "gpu-1"]
    inv.forget("a")
    assert devices_of(inv.allocate(node("n3"), wanted)) == ["gpu-0", "gpu-1"]


def test_a_device_whose_own_selector_has_several_terms_keeps_its_pool_out():
    two_terms = {"nodeSelectorTerms": in_rack("r1")["nodeSelectorTerms"] + in_rack("r2")["nodeSelectorTerms"]}
    devices = [{"name": "link-0", "nodeSelector": two_terms}, {"name": "link-1", "allNodes": True}]
    inv = inventory(device_class(), resource_slice("s", devices, node=None, pool="p", perDeviceNodeSelection=True))
    assert inv.fits(racked("n1", "r1"), one_claim(any_gpu()), 2) == 0
    assert "has a node selector of several terms" in inv.refusal(racked("n1", "r1"), one_claim(any_gpu(mode=ALL)))


# --- many members on one node ----------------------------------------------------------------------


def test_fits_counts_members_one_after_the_other_as_first_fit_leaves_the_devices():
    three_of_each = [gpu(f"gpu-{i}", "h100" if i < 3 else "a100") for i in range(6)]
    inv = inventory(device_class(), resource_slice("s", three_of_each))
    # The first member's "any" request takes an h100, the second backtracks to an a100, the third finds no h100.
    assert inv.fits(node(), one_claim(any_gpu(name="any"), h100()), 10) == 2
    assert inv.fits(node(), one_claim(any_gpu(name="any"), h100()), 1) == 1
    assert inv.fits(node(), (), 7) == 7 and inv.fits(node(), one_claim(any_gpu()), 0) == 0


def test_members_with_different_demands_must_fit_in_every_binding_order():
    inv = inventory(device_class(), resource_slice("s", [gpu("gpu-0", "h100"), gpu("gpu-1", "a100")]))
    anything, only_h100 = one_claim(any_gpu()), one_claim(h100())
    reason = inv.colocatable(node(), [anything, only_h100])
    assert reason == f"{CANNOT_ALLOCATE} for a member bound after 1 of the others"
    assert inv.colocatable(node(), [anything, anything]) is None
    assert inv.colocatable(node(), [only_h100, only_h100]) == reason
    assert inv.colocatable(node(), [one_claim(h100(2))]) == CANNOT_ALLOCATE
    assert inv.colocatable(node(), [only_h100, anything], taken={(DRIVER, "n1", "gpu-1")}) is not None


def test_an_order_that_only_works_because_of_the_slice_order_is_not_trusted():
    a100_first = inventory(device_class(), resource_slice("s", [gpu("gpu-0", "a100"), gpu("gpu-1", "h100")]))
    anything, only_h100 = one_claim(any_gpu()), one_claim(h100())
    assert a100_first.colocatable(node(), [anything, only_h100]) is None
    two_slices = inventory(device_class(), resource_slice("s-a", [gpu("gpu-0", "a100")], pool="p", slices_in_pool=2),
                           resource_slice("s-b", [gpu("gpu-1", "h100")], pool="p", slices_in_pool=2))
    assert two_slices.colocatable(node(), [anything, only_h100]) is not None


def test_fits_counts_for_the_worst_order_of_the_slices():
    a100s = resource_slice("s-a", [gpu("gpu-0", "a100"), gpu("gpu-1", "a100")], pool="p", slices_in_pool=2)
    h100s = resource_slice("s-b", [gpu("gpu-2", "h100"), gpu("gpu-3", "h100")], pool="p", slices_in_pool=2)
    inv = inventory(device_class(), a100s, h100s)
    one_of_each = one_claim(any_gpu(name="any"), h100())
    assert devices_of(inv.allocate(node(), one_of_each)) == ["gpu-0", "gpu-2"]  # in the model's own order, 2 fit
    assert inv.fits(node(), one_of_each, 2) == 1  # h100s first: the first member takes both


def test_too_many_orders_are_refused_rather_than_guessed(monkeypatch):
    alternating = [gpu(f"gpu-{i}", "h100" if i % 2 else "a100") for i in range(8)]
    inv = inventory(device_class(), resource_slice("s", alternating))
    demands = [one_claim(any_gpu())] * 2 + [one_claim(h100())] * 2
    assert inv.colocatable(node(), demands) is None
    monkeypatch.setattr(allocator, "MAX_STATES", 2)
    assert inv.colocatable(node(), demands) == "more than 2 binding orders to check on n1"
    monkeypatch.setattr(allocator, "MAX_DEVICE_ORDERS", 1)
    split = inventory(device_class(), resource_slice("s-a", [gpu("gpu-0", "a100")], pool="p", slices_in_pool=2),
                      resource_slice("s-b", [gpu("gpu-1", "h100")], pool="p", slices_in_pool=2))
    assert "too many orders" in split.colocatable(node(), demands)


# --- extended resources (KEP-5004) -----------------------------------------------------------------


EXAMPLE_GPU = "example.com/gpu"


def extended_inventory(*extra):
    return inventory(device_class("ext-gpu", extended_resource=EXAMPLE_GPU), resource_slice("s", gpus(4)), *extra)


def test_a_device_class_serves_its_extended_resource_only_where_allocatable_does_not_list_it():
    inv = extended_inventory()
    assert inv.extended_allocatable(node())[EXAMPLE_GPU] == 4
    assert inv.extended_allocatable(node(allocatable={EXAMPLE_GPU: "0"}))[EXAMPLE_GPU] == 4
    assert EXAMPLE_GPU not in inv.extended_allocatable(node(allocatable={EXAMPLE_GPU: "2"}))
    assert inv.extended_allocatable(node())["deviceclass.resource.kubernetes.io/ext-gpu"] == 4


def test_explicit_claims_take_from_the_extended_resource_and_its_own_claims_do_not():
    explicit = claim_object("c", [request(device_class="ext-gpu")], results=[("gpu", (DRIVER, "n1", "gpu-0"))])
    own = claim_object("p-extended-resources-x", [request(device_class="ext-gpu")],
                       results=[("container-0-request-1", (DRIVER, "n1", "gpu-1"))],
                       annotations={EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"})
    inv = extended_inventory(device_class(), explicit, own)
    assert inv.extended_allocatable(node())[EXAMPLE_GPU] == 3
    inv.hold("planned", node(), one_claim(any_gpu()))
    assert inv.extended_allocatable(node())[EXAMPLE_GPU] == 2
    extended = inv.extended_claim({EXAMPLE_GPU: Fraction(1)}, node())
    inv.hold("extended-member", node(), (extended,))
    assert inv.extended_allocatable(node())[EXAMPLE_GPU] == 2
    assert inv.fits(node(), one_claim(any_gpu()), 5) == 0


def test_the_newest_class_wins_an_extended_resource_name():
    inv = inventory(device_class("old", ("false",), EXAMPLE_GPU, created="2025-01-01T00:00:00Z"),
                    device_class("new", extended_resource=EXAMPLE_GPU, created="2025-06-01T00:00:00Z"),
                    resource_slice("s", gpus(2)))
    assert inv.extended_claim({EXAMPLE_GPU: Fraction(1)}, node()).requests[0].device_class == "new"
    inv.remove_device_class("new")
    assert inv.extended_claim({EXAMPLE_GPU: Fraction(1)}, node()).requests[0].device_class == "old"
    tie = inventory(device_class("b", extended_resource=EXAMPLE_GPU), device_class("a", extended_resource=EXAMPLE_GPU))
    assert tie.extended_claim({EXAMPLE_GPU: Fraction(1)}, node()).requests[0].device_class == "a"


def test_the_extended_claim_comes_after_the_pods_own_claims():
    inv = extended_inventory(device_class())
    own = one_claim(any_gpu())
    assert inv.demand_on(node(allocatable={EXAMPLE_GPU: "4"}), own, {EXAMPLE_GPU: Fraction(2)}) is own
    on_dra = inv.demand_on(node(), own, {EXAMPLE_GPU: Fraction(2), "cpu": Fraction(1)})
    assert on_dra[0] is own[0] and on_dra[1].extended
    assert on_dra[1].requests == (DeviceRequest(EXAMPLE_GPU, "ext-gpu", count=2),)
    assert devices_of(inv.allocate(node(), on_dra)) == ["gpu-0", "gpu-1", "gpu-2"]
    assert inv.extended_claim({"cpu": Fraction(1)}, node()) is None


def test_a_broken_class_serves_nothing():
    inv = inventory(device_class("ext-gpu", selectors=("device.nope.x",), extended_resource=EXAMPLE_GPU),
                    resource_slice("s", gpus(2)))
    assert inv.extended_allocatable(node()) == {}


def test_a_class_that_breaks_on_some_of_a_nodes_devices_and_matches_others_serves_none_of_them():
    h100_only = "device.attributes['gpu.example.com'].model == 'h100'"  # no such member on a device without a model
    inv = inventory(device_class("ext-gpu", selectors=(h100_only,), extended_resource=EXAMPLE_GPU),
                    resource_slice("s", [gpu("gpu-0", "h100"), gpu("gpu-1")]),
                    resource_slice("t", [gpu("gpu-0", "h100"), gpu("gpu-1", "a100")], node="n2"))
    assert inv.extended_allocatable(node())[EXAMPLE_GPU] == 0
    assert inv.extended_allocatable(node("n2"))[EXAMPLE_GPU] == 1
    inv.hold("planned", node("n2"), one_claim(DeviceRequest("gpu", "ext-gpu")))
    assert inv.extended_allocatable(node("n2"))[EXAMPLE_GPU] == 0  # the same device shapes, the hold counted


# --- explaining a group that does not fit ------------------------------------------------------------


def test_a_shortage_is_explained_with_the_inventorys_numbers():
    inv = inventory(device_class(), resource_slice("s1", gpus(4, "a100"), node="dra-1"),
                    resource_slice("s2", gpus(2, "a100"), node="dra-2"))
    assert inv.shortage([node("dra-1")], one_claim(any_gpu()), 6) == (
        "needs 6 devices of class gpu.example.com on one node; dra-1 has 4")
    assert inv.shortage([node("dra-1"), node("dra-2")], one_claim(any_gpu(2)), 4) == (
        "needs 8 devices of class gpu.example.com (4 × 2); "
        "2 eligible nodes have 6 free, at most 4 on one node (dra-1)")
    assert inv.shortage([node("dra-1")], one_claim(h100()), 1) == (
        f"needs 1 device of class gpu.example.com matching {H100} on one node; dra-1 has 0")
    assert inv.shortage([node("dra-1")], one_claim(any_gpu()), 4) is None


# --- CEL is evaluated once per expression and device shape ---------------------------------------------


def test_identical_devices_on_thousands_of_nodes_are_evaluated_once_per_expression():
    inv = inventory(device_class())
    nodes = [node(f"n{i}") for i in range(5000)]
    for each in nodes:
        inv.put_slice(resource_slice(f"s-{each.name}", gpus(8, "h100"), node=each.name))
    wanted = one_claim(h100())
    assert all(inv.fits(each, wanted, 8) == 8 for each in nodes)
    assert inv.cel_evaluations == 2  # the class's selector and the request's, once each
    trial = inv.copy()
    assert trial.fits(nodes[0], one_claim(h100(2)), 4) == 4
    assert trial.colocatable(nodes[1], [wanted, one_claim(any_gpu())]) is None
    assert inv.cel_evaluations == trial.cel_evaluations == 2


# --- the recordings of a real kube-scheduler ------------------------------------------------------------


CASES = sorted(SCHEDULER.glob("dra-*.json"))


class Replay:
    """A recorded case through the model: each pod, in order, on its pinned node after the earlier ones."""

    def __init__(self, case, write_back):
        self.case, self.write_back = case, write_back
        self.inventory = Inventory()
        self.nodes = {obj["metadata"]["name"]: node_from_api(obj) for obj in case["nodes"]}
        put = {"DeviceClass": self.inventory.put_device_class, "ResourceSlice": self.inventory.put_slice}
        for obj in case["cluster_objects"]:
            put[obj["kind"]](obj)
        self.templates, self.claims = {}, {}
        for obj in case["namespaced_objects"]:
            key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
            (self.templates if obj["kind"] == "ResourceClaimTemplate" else self.claims)[key] = obj
            if obj["kind"] == "ResourceClaim":
                self.inventory.put_claim(obj)
        self.ledger = Ledger(replace(n, allocatable={**n.allocatable, **self.inventory.extended_allocatable(n)})
                             for n in self.nodes.values())
        self.allocated = {}

    def run(self):
        return [self.place(pod) for pod in self.case["pods"]]

    def place(self, pod):
        """(node or None, the refusal) — the refusal is the DRA filter's, else the resource that is short."""
        name = pod["metadata"]["name"]
        target = self.nodes[pinned_node(required_affinity_terms(pod["spec"]))]
        wanted = device_demand(pod, self.templates, self.claims)
        assert not isinstance(wanted, Unresolved), wanted
        requests = pod_requests(pod)
        wanted = self.inventory.demand_on(target, wanted, requests)
        refusal = self.inventory.refusal(target, wanted)
        if refusal is None and not members_fitting(usage(requests), self.ledger.free(target.name), 1):
            free = self.ledger.free(target.name)
            refusal = "Insufficient " + next(r for r, v in requests.items() if v > free.get(r, 0))
        if refusal is not None:
            return None, refusal
        results = self.inventory.allocate(target, wanted)
        self.ledger.reserve(name, target.name, requests)
        for claim, result in zip(wanted, results):
            self.allocated.setdefault(claim.shared or (name, claim.name), result)
        if self.write_back:
            self.write_allocations(pod, target, wanted, results)
        else:
            self.inventory.hold(name, target, wanted)
        return target.name, None

    def write_allocations(self, pod, target, wanted, results):
        """What the scheduler does on binding: each claim it allocated gets its allocation and consumer."""
        name = pod["metadata"]["name"]
        for claim, result in zip(wanted, results):
            key = claim.shared or (pod["metadata"]["namespace"], f"{name}-{claim.name}")
            existing = self.claims.get(key) or claim_object(key[1], [])
            written = json.loads(json.dumps(existing))
            written.setdefault("status", {}).setdefault("allocation", allocation(
                [(r.request, r.device) for r in result], target.name))
            written["status"].setdefault("reservedFor", []).append({"resource": "pods", "name": name, "uid": name})
            if claim.extended:
                written["metadata"].setdefault("annotations", {})[EXTENDED_RESOURCE_CLAIM_ANNOTATION] = "true"
            self.claims[key] = written
            self.inventory.put_claim(written)
            if claim.shared is None:
                pod.setdefault("status", {}).setdefault("resourceClaimStatuses", []).append(
                    {"name": claim.name, "resourceClaimName": key[1]})


@pytest.mark.parametrize("write_back", [False, True], ids=["held", "allocated"])
@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_every_recorded_outcome_is_predicted(path, write_back):
    case = json.loads(path.read_text())
    predicted = Replay(case, write_back).run()
    for outcome, (bound_to, refusal) in zip(case["outcomes"], predicted, strict=True):
        assert bound_to == outcome["bound_to"], (outcome["pod"], refusal, outcome.get("message"))
        if refusal is not None:
            assert f"1 {refusal}" in outcome["message"], (outcome["pod"], refusal, outcome["message"])


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_the_devices_chosen_are_those_the_scheduler_chose(path):
    case = json.loads(path.read_text())
    replay = Replay(case, write_back=False)
    replay.run()
    for recorded in case["resource_claims_after"]:
        if recorded["allocation"] is None:
            continue
        consumer = (recorded["owner"] or recorded["reservedFor"])[0]
        extended = recorded["name"].startswith(f"{consumer}-extended-resources-")
        mine = next(result for key, result in replay.allocated.items()
                    if key == (case["namespace"], recorded["name"]) or key[0] == consumer
                    and (key[1] == EXTENDED_CLAIM_NAME) == extended)
        expected = [(r["driver"], r["pool"], r["device"]) for r in recorded["allocation"]]
        assert [r.device for r in mine] == expected, recorded["name"]
        if not extended:
            assert [r.request for r in mine] == [r["request"] for r in recorded["allocation"]]


def test_every_recorded_dra_case_is_replayed():
    assert {p.stem for p in CASES} == {
        "dra-claim-template-per-pod", "dra-two-devices-per-pod", "dra-shared-claim", "dra-cel-selector",
        "dra-extended-resource", "dra-extended-resource-and-device-plugin"}


# --- the room index --------------------------------------------------------------------------------

def test_the_room_counts_nodes_by_pods_of_a_demand_they_take_and_follows_holds_when_read():
    nodes = [node("n1"), node("n2")]
    inv = inventory(device_class(), resource_slice("s1", gpus(4), node="n1"), resource_slice("s2", gpus(2), node="n2"))
    two = one_claim(any_gpu(2))
    assert inv.room(two, nodes) == {2: {"n1"}, 1: {"n2"}}
    inv.hold("m1", nodes[0], two)
    assert inv.room(two, nodes) == {1: {"n1", "n2"}}
    inv.forget("m1")
    assert inv.room(two, nodes) == {2: {"n1"}, 1: {"n2"}}


def test_a_copys_holds_move_its_room_and_not_the_originals():
    nodes = [node("n1")]
    inv = inventory(device_class(), resource_slice("s1", gpus(4), node="n1"))
    one = one_claim(any_gpu())
    inv.room(one, nodes)
    plan = inv.copy()
    plan.hold("m1", nodes[0], one)
    assert plan.room(one, nodes) == {3: {"n1"}}
    assert inv.room(one, nodes) == {4: {"n1"}}


def test_there_is_no_room_index_when_a_slice_serves_nodes_by_selector():
    shared = resource_slice("net", gpus(2), node=None, allNodes=True)
    assert inventory(device_class(), shared).room(one_claim(any_gpu()), [node("n1")]) is None


def test_the_few_nodes_with_devices_among_many_are_named_and_many_are_not_listed():
    inv = inventory(device_class(), *(resource_slice(f"s{i}", gpus(1), node=f"n{i}") for i in range(3)))
    everyone = {f"n{i}" for i in range(100)}
    assert inv.nodes_with_devices_among(everyone, 3) == ["n0", "n1", "n2"]
    assert inv.nodes_with_devices_among(everyone, 2) is None
    assert inv.nodes_with_devices_among({"n2", "n7"}, 3) == ["n2"]
    inv.put_slice(resource_slice("s7", gpus(1), node="n7"))
    assert inv.nodes_with_devices_among({"n2", "n7"}, 3) == ["n2", "n7"]
    inv.remove_slice("s2")
    assert inv.nodes_with_devices_among(everyone, 3) == ["n0", "n1", "n7"]


def test_the_rooms_nodes_by_name_and_counts_follow_the_holds_in_a_copy_and_not_in_its_source():
    nodes = [node("n1"), node("n2")]
    inv = inventory(device_class(), resource_slice("s1", gpus(4), node="n1"), resource_slice("s2", gpus(2), node="n2"))
    two = one_claim(any_gpu(2))
    inv.room(two, nodes)
    assert inv.room_order(two, 1) == ["n2"] and inv.room_order(two, 2) == ["n1"]
    plan = inv.copy()
    plan.hold("m1", nodes[0], two)
    plan.room(two, nodes)
    assert plan.room_order(two, 1) == ["n1", "n2"] and plan.room_order(two, 2) == []
    assert plan.room_count(two, "n1") == plan.fits(nodes[0], two, 5) == 1 and inv.room_count(two, "n1") == 2
    plan.forget("m1")
    plan.room(two, nodes)
    assert plan.room_order(two, 1) == ["n2"] and plan.room_order(two, 2) == ["n1"]
    assert inv.room_order(two, 1) == ["n2"] and inv.room_order(two, 2) == ["n1"]


def test_rooms_of_demands_differing_in_counts_share_a_nodes_free_devices_and_others_do_not():
    nodes = [node("n1")]
    mixed = [gpu("gpu-0", "h100"), gpu("gpu-1", "h100"), gpu("gpu-2", "a100"), gpu("gpu-3", "a100")]
    inv = inventory(device_class(), resource_slice("s1", mixed, node="n1"))
    one, two, fast = one_claim(any_gpu()), one_claim(any_gpu(2)), one_claim(h100())
    assert [inv.room(d, nodes) for d in (one, two, fast)] == [{4: {"n1"}}, {2: {"n1"}}, {2: {"n1"}}]
    inv.hold("m1", nodes[0], one_claim(h100(2)))  # counted again when next read, for every demand
    assert [inv.room(d, nodes) for d in (one, two, fast)] == [{2: {"n1"}}, {1: {"n1"}}, {}]
    inv.forget("m1")
    inv.hold("m2", nodes[0], one_claim(any_gpu(3)))  # the first three: both h100 and an a100
    assert [inv.room(d, nodes) for d in (fast, one, two)] == [{}, {1: {"n1"}}, {}]
