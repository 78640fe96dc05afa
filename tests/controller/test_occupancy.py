"""The index's occupancy: devices, neighbours and volumes kept up to date object by object."""

import pytest

from gangkeeper import names
from gangkeeper.controller.cache.index import NODES, PODS, ClusterIndex
from gangkeeper.controller.cache.occupancy import RESOURCE_CLAIMS, RESOURCES, Occupancy
from gangkeeper.controller.reading import kube
from gangkeeper.controller.reading.objects import cached_object
from gangkeeper.controller.reading.pods import member_from_api, pod_facts
from tests.controller.builders import node, pod_object
from tests.controller.occupied import (
    claiming,
    device_class,
    device_slice,
    template,
    with_labels,
)

GPU = "nvidia.com/gpu"


def index_with(*objects, nodes=("dra-1",)):
    index = ClusterIndex()
    index.apply([(NODES, name, node(name, gpus=None)) for name in nodes])
    index.apply(list(objects))
    return index


def put(index, pod):
    index.apply([(PODS, f"{pod['metadata']['namespace']}/{pod['metadata']['name']}", pod_facts(pod))])


def reserved(name, node_name="dra-1"):
    return with_labels(claiming(name, reserved_node=node_name), {names.GROUP_LABEL: "g"})


def allocated_claim(pod, device):
    name = f"{pod}-gpu-x1"
    return RESOURCE_CLAIMS, f"team/{name}", {
        "metadata": {"name": name, "namespace": "team"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.example.com", "pool": "dra-1", "device": device}]}}}}


def test_a_device_class_with_an_extended_resource_name_adds_it_to_the_ledger_on_nodes_without_it():
    index = index_with(device_class("gpu.nvidia.com", extended=GPU), device_slice("dra-1", 8), nodes=("dra-1",))
    index.apply([(NODES, "listed", node("listed", gpus=2))])
    assert index.ledger.free("dra-1")[GPU] == 8
    assert index.ledger.free("listed")[GPU] == 2
    index.apply([(device_slice("dra-1", 8)[0], "dra-1-gpus", None)])
    assert index.ledger.free("dra-1").get(GPU, 0) == 0


def test_a_reserved_member_holds_its_devices_until_the_scheduler_allocates_its_claim():
    index = index_with(device_class(), device_slice("dra-1", 4), template())
    put(index, reserved("m0"))
    assert index.occupancy.devices.held("uid-team-m0") == "dra-1"
    bound = claiming("m0", gated=False, node_name="dra-1", phase="Running")
    bound["metadata"]["labels"] = {names.GROUP_LABEL: "g"}
    bound["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "m0-gpu-x1"}]
    put(index, bound)
    assert index.occupancy.devices.held("uid-team-m0") == "dra-1"  # bound, its claim not yet seen allocated
    index.apply([allocated_claim("m0", "gpu-0")])
    assert index.occupancy.devices.held("uid-team-m0") is None


def test_a_member_gone_releases_what_it_held():
    index = index_with(device_class(), device_slice("dra-1", 4), template())
    put(index, reserved("m0"))
    index.apply([(PODS, "team/m0", None)])
    assert index.occupancy.devices.held("uid-team-m0") is None
    assert "uid-team-m0" not in index.occupancy.placements


def test_bound_pods_are_neighbours_and_reserved_members_too():
    index = index_with()
    put(index, pod_object("running", gated=False, node_name="dra-1", phase="Running"))
    put(index, with_labels(pod_object("waiting", reserved_node="dra-1"), {names.GROUP_LABEL: "g"}))
    assert {"uid-team-running", "uid-team-waiting"} <= set(index.occupancy.placements._pods)


def test_the_consistency_rebuild_keeps_devices_and_claims():
    objects = [device_class(), device_slice("dra-1", 4), template()]
    index = index_with(*objects)
    pod = reserved("m0")
    put(index, pod)
    fresh, differences = index.rebuilt_from([pod_facts(pod)], [], [node("dra-1", gpus=None)], objects=objects)
    assert differences == []
    assert fresh.occupancy.devices.held("uid-team-m0") == "dra-1"


def test_an_object_of_another_resource_is_refused_with_the_resources_it_takes():
    with pytest.raises(ValueError, match="configmaps.*resourceslices.resource.k8s.io"):
        Occupancy().put("configmaps", "team/x", {})


def test_the_informers_keep_everything_but_managed_fields():
    obj = {"metadata": {"name": "c", "managedFields": [{"manager": "kubectl"}], "annotations": {"a": "b"}},
           "spec": {"x": 1}}
    assert cached_object(obj) == {"metadata": {"name": "c", "annotations": {"a": "b"}}, "spec": {"x": 1}}


def test_the_controllers_informers_watch_what_the_occupancy_reads():
    assert tuple(resource.name for resource in kube.OCCUPANCY) == RESOURCES


def test_a_members_devices_follow_its_template_when_the_template_changes():
    index = index_with(device_class(), device_slice("dra-1", 4), template(count=1))
    member = member_from_api(claiming("m0"))
    assert [r.count for r in index.occupancy.demand(member)[0].requests] == [1]
    index.apply([template(count=3)])
    assert [r.count for r in index.occupancy.demand(member)[0].requests] == [3]


def test_arriving_members_rooms_are_made_once_per_claims_whatever_else_they_request(monkeypatch):
    index = index_with(device_class("gpu.nvidia.com", extended=GPU), device_slice("dra-1", 8),
                       template(device_class_name="gpu.nvidia.com"))
    asked = []
    made = Occupancy.room
    monkeypatch.setattr(Occupancy, "room", lambda self, member, demand, pool: asked.append(member.name)
                        or made(self, member, demand, pool))
    members = [member_from_api(claiming("small", cpu="1")), member_from_api(claiming("large", cpu="8")),
               member_from_api(with_gpus(claiming("plain-gpus"), 2))]  # its extended resource: no room of its own
    index.occupancy.index_rooms(members, index.pool)
    assert asked == ["small", "plain-gpus"]
    demand = index.occupancy.demand(members[0])
    assert index.occupancy.devices.room_count(demand, "dra-1") == 8


def with_gpus(pod, count):
    pod["spec"]["containers"][0]["resources"]["requests"][GPU] = str(count)
    return pod
