"""The structured allocator, device selection, which nodes reach a device (and the slices the API server
accepts) and extended resources served by DRA, on plain data."""

import pytest

from sim.api import APIError
from sim.devices import Selection, devices_of, slice_problems
from sim.dra import (
    Allocator,
    DraState,
    allocation_result,
    extended_requests,
    extended_resource_classes,
    needs_of,
    node_selector,
)
from sim.placement import node_facts

CLASS = {"metadata": {"name": "gpu.example.com"},
         "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}}
CLASSES = {"gpu.example.com": CLASS}


def node(name, labels=None):
    return node_facts({"metadata": {"name": name, "labels": labels or {}}, "spec": {},
                       "status": {"allocatable": {"cpu": "8", "pods": "110"},
                                  "conditions": [{"type": "Ready", "status": "True"}]}})


def device(name, **attributes):
    typed = {k: {"int": v} if isinstance(v, int) else {"string": v} for k, v in attributes.items()}
    return {"name": name, "attributes": typed}


def slice_of(name, devices, *, node_name=None, pool=None, generation=1, count=1, driver="gpu.example.com", **scope):
    spec = {"driver": driver, "devices": devices, "pool": {"name": pool or node_name or name, "generation": generation,
                                                           "resourceSliceCount": count}}
    if node_name:
        spec["nodeName"] = node_name
    spec.update(scope)
    return {"metadata": {"name": name}, "spec": spec}


def request(name="gpu", count=1, mode="ExactCount", selectors=()):
    exactly = {"deviceClassName": "gpu.example.com", "allocationMode": mode,
               "selectors": [{"cel": {"expression": e}} for e in selectors]}
    if mode == "ExactCount":
        exactly["count"] = count
    return {"name": name, "exactly": exactly}


def claim(*requests, constraints=()):
    return needs_of({"devices": {"requests": list(requests), "constraints": list(constraints)}})


def allocate(slices, claims, on="n1", taken=(), classes=CLASSES):
    target = node(on)
    devices = [d for d in devices_of(slices) if d.on(target)]
    picked = Allocator(devices, classes, {t: "other" for t in taken}, Selection()).allocate(claims)
    return None if picked is None else [[(request, d.name) for request, d in p] for p in picked]


FOUR = slice_of("n1-gpus", [device(f"gpu-{i}") for i in range(4)], node_name="n1")


def test_devices_go_in_order_and_each_to_one_claim():
    assert allocate([FOUR], [claim(request(count=2)), claim(request())]) == [
        [("gpu", "gpu-0"), ("gpu", "gpu-1")], [("gpu", "gpu-2")]]
    assert allocate([FOUR], [claim(request(count=5))]) is None


def test_devices_allocated_to_other_claims_are_taken():
    taken = [("gpu.example.com", "n1", "gpu-0"), ("gpu.example.com", "n1", "gpu-2")]
    assert allocate([FOUR], [claim(request(count=2))], taken=taken) == [[("gpu", "gpu-1"), ("gpu", "gpu-3")]]
    assert allocate([FOUR], [claim(request(count=3))], taken=taken) is None


def test_devices_of_other_nodes_and_unknown_classes_are_not_offered():
    other = slice_of("n2-gpus", [device("gpu-9")], node_name="n2")
    assert allocate([other], [claim(request())]) is None
    assert allocate([FOUR], [claim(request())], classes={}) is None


def test_cel_selectors_of_class_and_request_both_apply():
    mixed = slice_of("n1-gpus", [device("gpu-0", model="a100"), device("gpu-1", model="h100"),
                                 device("gpu-2", model="h100")], node_name="n1")
    h100 = request(selectors=["device.attributes['gpu.example.com'].model == 'h100'"])
    assert allocate([mixed], [claim(h100)]) == [[("gpu", "gpu-1")]]
    other_driver = {"gpu.example.com": {"metadata": {"name": "gpu.example.com"}, "spec": {"selectors": [
        {"cel": {"expression": "device.driver == 'nic.example.com'"}}]}}}
    assert allocate([mixed], [claim(h100)], classes=other_driver) is None


def test_a_selector_that_fails_or_does_not_compile_selects_nothing():
    missing = request(selectors=["device.attributes['gpu.example.com'].memory > 10"])
    broken = request(selectors=["device.driver =="])
    assert allocate([FOUR], [claim(missing)]) is None
    assert allocate([FOUR], [claim(broken)]) is None


def test_capacities_are_quantities():
    sized = slice_of("n1-gpus", [{"name": "small", "capacity": {"memory": {"value": "40Gi"}}},
                                 {"name": "large", "capacity": {"memory": {"value": "80Gi"}}}], node_name="n1")
    big = request(selectors=["device.capacity['gpu.example.com'].memory.compareTo(quantity('64Gi')) >= 0"])
    assert allocate([sized], [claim(big)]) == [[("gpu", "large")]]
    bigger = request(selectors=["device.capacity['gpu.example.com'].memory.isGreaterThan(quantity('80Gi'))"])
    assert allocate([sized], [claim(bigger)]) is None


def test_all_mode_takes_every_selected_device_only_when_none_is_in_use():
    assert allocate([FOUR], [claim(request(mode="All"))]) == [[("gpu", f"gpu-{i}") for i in range(4)]]
    assert allocate([FOUR], [claim(request(mode="All"))], taken=[("gpu.example.com", "n1", "gpu-3")]) is None
    incomplete = slice_of("n1-gpus", [device("gpu-0")], node_name="n1", count=2)
    assert allocate([incomplete], [claim(request(mode="All"))]) is None
    assert allocate([incomplete], [claim(request())]) == [[("gpu", "gpu-0")]]


def test_only_the_newest_generation_of_a_pool_counts():
    old = slice_of("old", [device("gpu-old")], node_name="n1", pool="p", generation=1)
    new = slice_of("new", [device("gpu-new")], node_name="n1", pool="p", generation=2)
    assert allocate([old, new], [claim(request())]) == [[("gpu", "gpu-new")]]


def test_backtracking_finds_devices_that_share_an_attribute():
    racks = slice_of("n1-gpus", [device("gpu-0", rack="a"), device("gpu-1", rack="b"), device("gpu-2", rack="b")],
                     node_name="n1")
    same_rack = {"matchAttribute": "gpu.example.com/rack"}
    assert allocate([racks], [claim(request(count=2), constraints=[same_rack])]) == [
        [("gpu", "gpu-1"), ("gpu", "gpu-2")]]
    assert allocate([racks], [claim(request("a"), request("b"), constraints=[same_rack])]) == [
        [("a", "gpu-1"), ("b", "gpu-2")]]
    unlabelled = {"matchAttribute": "gpu.example.com/row"}
    assert allocate([racks], [claim(request(), constraints=[unlabelled])]) is None


def test_first_available_takes_the_first_subrequest_that_works():
    mixed = slice_of("n1-gpus", [device("gpu-0", model="a100")], node_name="n1")
    prioritized = {"name": "gpu", "firstAvailable": [
        {"name": "h100", "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1,
         "selectors": [{"cel": {"expression": "device.attributes['gpu.example.com'].model == 'h100'"}}]},
        {"name": "any", "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1}]}
    assert allocate([mixed], [claim(prioritized)]) == [[("gpu/any", "gpu-0")]]


def test_the_allocation_pins_node_local_devices_and_carries_network_devices_selectors():
    [local] = devices_of([FOUR])[:1]
    result = allocation_result(claim(request()), [("gpu", local)], CLASSES)
    assert result == {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "n1",
                                               "device": "gpu-0"}]},
                      "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                          {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}
    rack = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]}
    shared = devices_of([slice_of("rack-r1", [device("nic-0")], pool="r1", nodeSelector=rack)])
    assert shared[0].on(node("n1", {"rack": "r1"})) and not shared[0].on(node("n2", {"rack": "r2"}))
    assert allocation_result(claim(request()), [("gpu", shared[0])], CLASSES)["nodeSelector"] == rack
    everywhere = devices_of([slice_of("fabric", [device("link-0")], pool="fabric", allNodes=True)])
    assert everywhere[0].on(node("n9")) and "nodeSelector" not in allocation_result(
        claim(request()), [("gpu", everywhere[0])], CLASSES)


def test_class_and_claim_configuration_goes_into_the_allocation():
    configured = {"gpu.example.com": dict(CLASS, spec=dict(CLASS["spec"], config=[{"opaque": {"driver": "d", "parameters": {}}}]))}
    needs = needs_of({"devices": {"requests": [request()],
                                  "config": [{"requests": ["gpu"], "opaque": {"driver": "d", "parameters": {"a": 1}}}]}})
    [local] = devices_of([FOUR])[:1]
    assert allocation_result(needs, [("gpu", local)], configured)["devices"]["config"] == [
        {"source": "FromClass", "opaque": {"driver": "d", "parameters": {}}},
        {"source": "FromClaim", "opaque": {"driver": "d", "parameters": {"a": 1}}, "requests": ["gpu"]}]


def test_a_class_serves_its_extended_resource_and_its_implicit_one():
    older = {"metadata": {"name": "old", "creationTimestamp": "2026-01-01T00:00:00Z"},
             "spec": {"extendedResourceName": "example.com/gpu"}}
    newer = {"metadata": {"name": "new", "creationTimestamp": "2026-02-01T00:00:00Z"},
             "spec": {"extendedResourceName": "example.com/gpu"}}
    assert extended_resource_classes([older, newer]) == {
        "example.com/gpu": "new", "deviceclass.resource.kubernetes.io/old": "old",
        "deviceclass.resource.kubernetes.io/new": "new"}


def test_extended_requests_are_per_container_and_init_containers_reuse_later_ones():
    pod = {"spec": {"initContainers": [{"name": "init", "resources": {"requests": {"example.com/gpu": "2"}}}],
                    "containers": [{"name": "main", "resources": {"requests": {"cpu": "1", "example.com/gpu": "1"}}}]}}
    requests, mappings = extended_requests(pod, ["example.com/gpu"], {"example.com/gpu": "ext"})
    assert [(r["name"], r["exactly"]["count"]) for r in requests] == [("container-0-request-0", 1),
                                                                      ("container-1-request-1", 1)]
    assert [(m["containerName"], m["requestName"]) for m in mappings] == [
        ("main", "container-1-request-1"), ("init", "container-1-request-1"), ("init", "container-0-request-0")]
    two_inits = {"spec": {"initContainers": [{"name": "a", "resources": {"requests": {"example.com/gpu": "2"}}},
                                             {"name": "b", "resources": {"requests": {"example.com/gpu": "3"}}}],
                          "containers": [{"name": "main"}]}}
    requests, mappings = extended_requests(two_inits, ["example.com/gpu"], {"example.com/gpu": "ext"})
    assert [(r["name"], r["exactly"]["count"]) for r in requests] == [("container-1-request-0", 3)]
    assert {m["requestName"] for m in mappings} == {"container-1-request-0"}


def test_the_allocation_gathers_its_devices_selectors_into_one_term_each_requirement_once():
    rack = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1", "r2"]}]}]}
    reordered = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r2", "r1"]}],
                                        "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]}]}
    links = devices_of([slice_of("a", [device("link-0")], pool="a", nodeSelector=rack),
                        slice_of("b", [device("link-1")], pool="b", nodeSelector=reordered),
                        slice_of("c", [device("link-2")], pool="c", allNodes=True)])
    assert node_selector(links) == {"nodeSelectorTerms": [{
        "matchExpressions": rack["nodeSelectorTerms"][0]["matchExpressions"],
        "matchFields": reordered["nodeSelectorTerms"][0]["matchFields"]}]}
    assert node_selector(links[2:]) is None


def test_a_device_selector_of_several_terms_cannot_be_written_into_an_allocation():
    two_terms = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]},
                                       {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r2"]}]}]}
    [either] = devices_of([slice_of("s", [{"name": "link-0", "nodeSelector": two_terms}], pool="p",
                                    perDeviceNodeSelection=True)])
    assert either.on(node("n1", {"rack": "r2"})) and not either.on(node("n3", {"rack": "r3"}))
    with pytest.raises(ValueError, match="unsupported ResourceSlice.NodeSelector with 2 terms"):
        node_selector([either])
    state = DraState()
    state.observe("deviceclasses", "ADDED", CLASS)
    state.observe("resourceslices", "ADDED", slice_of("s", [{"name": "link-0", "nodeSelector": two_terms}], pool="p",
                                                      perDeviceNodeSelection=True))
    state.put_claim({"metadata": {"name": "link", "namespace": "ml"}, "spec": {"devices": {"requests": [request()]}}})
    pod = {"metadata": {"name": "p", "namespace": "ml", "uid": "u"},
           "spec": {"resourceClaims": [{"name": "link", "resourceClaimName": "link"}]}}
    assert state.prepare(pod, {}).check.reason(node("n1", {"rack": "r1"})) == (
        "create NodeSelector for claim link: unsupported ResourceSlice.NodeSelector with 2 terms")


def test_a_device_reaches_the_nodes_its_own_fields_name_under_per_device_node_selection_and_none_else():
    per_device = slice_of("s", [{"name": "mine", "nodeName": "n1"}, {"name": "all", "allNodes": True},
                                {"name": "unplaced"}], pool="p", perDeviceNodeSelection=True)
    mine, everywhere, unplaced = devices_of([per_device])
    assert mine.on(node("n1")) and not mine.on(node("n2"))
    assert everywhere.on(node("n2")) and not unplaced.on(node("n1"))


RACK_SELECTOR = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]}


@pytest.mark.parametrize(("spec", "expected"), [
    ({"nodeName": "n1"}, []),
    ({"nodeSelector": RACK_SELECTOR}, []),
    ({"allNodes": True}, []),
    ({}, ["spec: Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` "
          "is required"]),
    ({"nodeName": "n1", "allNodes": True},
     ['spec: Invalid value: "{`nodeName`, `allNodes`}": exactly one of `nodeName`, `nodeSelector`, `allNodes`, '
      "`perDeviceNodeSelection` is required, but multiple fields are set"]),
    ({"allNodes": False},
     ["spec.allNodes: Invalid value: false: must be either unset or set to true",
      "spec: Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` "
      "is required"]),
    ({"nodeSelector": {"nodeSelectorTerms": RACK_SELECTOR["nodeSelectorTerms"] * 2}},
     ['spec.nodeSelector.nodeSelectorTerms: Invalid value: [{"matchExpressions":[{"key":"rack","operator":"In",'
      '"values":["r1"]}]},{"matchExpressions":[{"key":"rack","operator":"In","values":["r1"]}]}]: '
      "must have exactly one node selector term"]),
], ids=["node", "selector", "all", "none", "two", "false", "two-terms"])
def test_a_slice_says_in_exactly_one_way_which_nodes_reach_it(spec, expected):
    resource_slice = {"metadata": {"name": "s"}, "spec": {"driver": "gpu.example.com", **spec,
                                                          "devices": [device("gpu-0")]}}
    assert [str(error) for error in slice_problems(resource_slice)] == expected


def test_with_per_device_node_selection_each_device_says_in_exactly_one_way_which_nodes_reach_it():
    devices = [{"name": "ok", "nodeSelector": RACK_SELECTOR}, {"name": "none"},
               {"name": "both", "nodeName": "n1", "allNodes": True}]
    per_device = {"metadata": {"name": "s"}, "spec": {"perDeviceNodeSelection": True, "devices": devices}}
    required = ("exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` "
                "is set to true in the ResourceSlice spec")
    assert [str(error) for error in slice_problems(per_device)] == [
        f"spec.devices[1]: Required value: {required}",
        f'spec.devices[2]: Invalid value: "{{`nodeName`, `allNodes`}}": {required}']
    on_slice = {"metadata": {"name": "s"}, "spec": {"nodeName": "n1", "devices": [{"name": "d", "allNodes": True}]}}
    assert [str(error) for error in slice_problems(on_slice)] == [
        'spec.devices[0]: Invalid value: "null": `nodeName`, `nodeSelector` and `allNodes` can only be set if '
        "`perDeviceNodeSelection` is set to true in the ResourceSlice spec"]


def test_the_api_server_refuses_a_slice_reaching_nodes_two_ways_and_a_change_of_its_node(api):
    api.create("resourceslices", {"metadata": {"name": "s"}, "spec": {
        "driver": "gpu.example.com", "nodeName": "n1", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}}})
    with pytest.raises(APIError) as refused:
        api.patch("resourceslices", "s", {"spec": {"allNodes": True}})
    assert refused.value.code == 422 and "but multiple fields are set" in str(refused.value)
    with pytest.raises(APIError) as moved:
        api.patch("resourceslices", "s", {"spec": {"nodeName": "n2"}})
    assert 'spec.nodeName: Invalid value: "n2": field is immutable' in str(moved.value)
