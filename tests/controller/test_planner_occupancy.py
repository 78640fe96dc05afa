"""The planner with what decides besides resources: devices (DRA), the pods around a member
(pod affinity and anti-affinity, topology spread, host ports) and its volumes."""

from collections import Counter

from gangkeeper import names
from gangkeeper.controller.cache.index import PODS
from gangkeeper.controller.cache.occupancy import (
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
)
from gangkeeper.controller.model.members import group_of
from gangkeeper.controller.planning.planner import apply, plan_group
from gangkeeper.controller.planning.plans import NoFit, Topology
from gangkeeper.controller.planning.queue import plan_pass
from gangkeeper.controller.reading.pods import member_from_api
from tests.controller.builders import node, pod_object
from tests.controller.occupied import (
    DRIVER,
    HOSTNAME,
    anti_affinity,
    claiming,
    device_class,
    device_slice,
    gang_of,
    hosts,
    placement,
    plan,
    running,
    template,
    with_labels,
    with_spec,
    world,
)

ZONE = "topology.kubernetes.io/zone"
DOMAIN = "example.com/nvlink-domain"


def apart(name, size, gpus):
    """A group whose members keep apart: required anti-affinity on the hostname among themselves."""
    return gang_of(name, size, {"affinity": anti_affinity(HOSTNAME, {"job": name})}, gpus=gpus)


def two_zones():
    return [node(f"{zone}{i}", labels={ZONE: zone, HOSTNAME: f"{zone}{i}"}) for zone in "ab" for i in range(2)]


def zone_spread(when, job):
    return {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": when,
                                           "labelSelector": {"matchLabels": {"job": job}}}]}


# --- the pods around a member -------------------------------------------------------------------

def test_members_with_required_anti_affinity_on_hostname_go_to_distinct_nodes():
    index = world(hosts("a", "b", "c"))
    assert sorted(placement(plan(index, apart("aa", 2, gpus=4))).values()) == [1, 1]


def test_without_the_occupancy_the_same_group_is_packed_on_one_node():
    index = world(hosts("a", "b"))
    assert len(placement(plan_group(apart("aa", 2, gpus=4), index.pool, index.ledger))) == 1


def test_anti_affinity_that_cannot_be_met_says_how_many_nodes_it_needs():
    index = world(hosts("a", "b"), pods=[running("other", "b", gpus=8)])
    outcome = plan(index, apart("aa", 2, gpus=4))
    assert isinstance(outcome, NoFit)
    assert outcome.placeable == 1
    assert "anti-affinity: 1 members need 1 nodes with 4 free nvidia.com/gpu each" in outcome.reason


def test_an_existing_pods_anti_affinity_keeps_members_off_its_node():
    guard = running("guard", "a", affinity=anti_affinity(HOSTNAME, {"job": "g"}))
    index = world(hosts("a", "b"), pods=[guard])
    assert placement(plan(index, gang_of("g", 1, gpus=8))) == {"b": 1}


def test_a_spread_constraint_is_enforced_by_the_planner_within_its_skew():
    outcome = plan(world(two_zones()), gang_of("s", 4, zone_spread("DoNotSchedule", "s"), gpus=2))
    zones = Counter(node[0] for node in placement(outcome).elements())
    assert zones == {"a": 2, "b": 2}


def test_members_asking_the_same_host_port_go_to_distinct_nodes_and_avoid_nodes_that_hold_it():
    port = [{"name": "main", "resources": {"requests": {"nvidia.com/gpu": "1"}},
             "ports": [{"containerPort": 29500, "hostPort": 29500}]}]
    taken = running("holder", "a", containers=[{"name": "c", "ports": [{"containerPort": 1, "hostPort": 29500}]}])
    index = world(hosts("a", "b", "c"), pods=[taken])
    members = [member_from_api(with_spec(pod_object(f"hp-{i}", gpus=1), containers=port)) for i in range(2)]
    assert placement(plan(index, group_of(("team", "hp"), members, 2, 0.0))) == {"b": 1, "c": 1}


def test_planning_leaves_the_occupancy_as_it_was_and_apply_counts_the_plan():
    index = world(hosts("a", "b"))
    outcome = plan(index, apart("aa", 2, gpus=4))
    assert len(index.occupancy.placements) == 0
    working, around = index.ledger.copy(), index.occupancy.copy()
    apply(outcome, working, around, index.pool)
    assert len(around.placements) == 2 and len(index.occupancy.placements) == 0
    again = plan_group(group_of(("team", "aa2"), [member_from_api(with_labels(pod_object("x", gpus=4), {"job": "aa"}))],
                                1, 0.0), index.pool, working, Topology(), around)
    assert isinstance(again, NoFit)  # both nodes hold a member whose anti-affinity the newcomer matches


# --- devices --------------------------------------------------------------------------------------

def test_a_dra_group_larger_than_the_devices_waits_and_says_what_it_needs():
    index = world(hosts("dra-1", gpus=None), [device_class(), device_slice("dra-1", 4), template()])
    group = group_of(("team", "six"), [member_from_api(claiming(f"p{i}")) for i in range(6)], 6, 0.0)
    outcome = plan(index, group)
    assert isinstance(outcome, NoFit)
    assert "needs 6 devices of class gpu.example.com on one node; dra-1 has 4" in outcome.reason


def test_a_dra_group_too_large_for_many_nodes_with_devices_is_told_their_room_not_each_nodes_refusal():
    names_ = [f"dra-{i:02d}" for i in range(40)]  # more than the allocator is asked about one by one
    index = world(hosts(*names_, gpus=None), [device_class(), *(device_slice(n, 1) for n in names_), template()])
    group = group_of(("team", "many"), [member_from_api(claiming(f"p{i}")) for i in range(41)], 41, 0.0)
    outcome = plan(index, group)
    assert isinstance(outcome, NoFit)
    assert outcome.reason.endswith("needs devices for 41 members like p0; the 40 eligible nodes with devices have "
                                   "room for 40, at most 1 on one node (dra-39)")


def test_a_dra_group_on_nodes_with_free_devices_and_no_cpu_left_is_told_cpu_is_short():
    full = [pod_object(f"busy-{name}", gpus=0, cpu="94", gated=False, node_name=name, phase="Running")
            for name in ("dra-1", "dra-2")]
    index = world(hosts("dra-1", "dra-2", gpus=None),
                  [device_class(), device_slice("dra-1", 4), device_slice("dra-2", 4), template()], full)
    group = group_of(("team", "two"), [member_from_api(claiming(f"p{i}")) for i in range(2)], 2, 0.0)
    outcome = plan(index, group)
    assert isinstance(outcome, NoFit)
    assert (outcome.reason, outcome.limiting) == (
        "0 of 2 waiting members placeable: each member needs 4 cpu; 2 of 2 eligible nodes have less free", ("cpu",))


def test_a_dra_group_that_fits_is_spread_over_the_nodes_with_devices():
    index = world(hosts("dra-1", "dra-2", "plain", gpus=None),
                  [device_class(), device_slice("dra-1", 4), device_slice("dra-2", 4), template()])
    group = group_of(("team", "six"), [member_from_api(claiming(f"p{i}")) for i in range(6)], 6, 0.0)
    assert placement(plan(index, group)) == {"dra-1": 4, "dra-2": 2}


def test_devices_held_by_a_reserved_member_are_taken_for_the_next_group():
    index = world(hosts("dra-1", gpus=None), [device_class(), device_slice("dra-1", 4), template()],
                  pods=[with_labels(claiming("held", reserved_node="dra-1"), {names.GROUP_LABEL: "earlier"})])
    smaller = group_of(("team", "three"), [member_from_api(claiming(f"p{i}")) for i in range(3)], 3, 0.0)
    assert placement(plan(index, smaller)) == {"dra-1": 3}
    four = group_of(("team", "four"), [member_from_api(claiming(f"q{i}")) for i in range(4)], 4, 0.0)
    assert isinstance(plan(index, four), NoFit)


def test_a_pass_admits_the_smaller_dra_group_while_the_larger_waits():
    index = world(hosts("dra-1", gpus=None), [device_class(), device_slice("dra-1", 4), template()])
    large = group_of(("team", "large"), [member_from_api(claiming(f"l{i}")) for i in range(6)], 6, 0.0)
    small = group_of(("team", "small"), [member_from_api(claiming(f"s{i}")) for i in range(2)], 2, 1.0)
    result = plan_pass([large, small], index.pool, index.ledger, 10.0, occupancy=index.occupancy)
    assert [group.key[1] for group, _ in result.admitted] == ["small"]
    assert [waiting.group.key[1] for waiting in result.waiting] == ["large"]


def test_a_group_whose_claims_request_no_device_is_planned():
    # Planning it used to raise (a claim without requests had no allocation result), and with it
    # the whole pass.
    nothing = template("nothing")
    nothing[2]["spec"]["spec"]["devices"] = {}
    index = world(hosts("dra-1", gpus=None), [device_class(), device_slice("dra-1", 4), nothing])
    group = group_of(("team", "two"), [member_from_api(claiming(f"p{i}", "nothing")) for i in range(2)], 2, 0.0)
    assert placement(plan(index, group)) == {"dra-1": 2}


def test_a_missing_template_keeps_the_group_out_and_says_so():
    index = world(hosts("dra-1", gpus=None), [device_class(), device_slice("dra-1", 4)])
    outcome = plan(index, group_of(("team", "t"), [member_from_api(claiming("p0", "typo"))], 1, 0.0))
    assert isinstance(outcome, NoFit)
    assert 'resourceclaimtemplate.resource.k8s.io "typo" not found' in outcome.reason


def test_an_extended_resource_served_only_through_a_device_class_is_admitted_when_the_devices_suffice():
    index = world(hosts("dra-1", gpus=None), [device_class("gpu.nvidia.com", extended="nvidia.com/gpu"),
                                              device_slice("dra-1", 8)])
    assert placement(plan(index, gang_of("ext", 2, gpus=4))) == {"dra-1": 2}
    outcome = plan(index, gang_of("too-big", 3, gpus=4))
    assert isinstance(outcome, NoFit) and "nvidia.com/gpu" in outcome.reason


def test_a_node_listing_the_extended_resource_is_counted_by_its_allocatable_only():
    index = world(hosts("both", gpus=2), [device_class("gpu.nvidia.com", extended="nvidia.com/gpu"),
                                          device_slice("both", 8)])
    assert isinstance(plan(index, gang_of("ext", 3, gpus=1)), NoFit)


def test_members_whose_claims_differ_only_in_their_counts_share_a_node():
    index = world(hosts("dra-1", gpus=None), [device_class(), device_slice("dra-1", 4), template(),
                                              template("two-gpus", count=2)])
    members = [member_from_api(claiming("big", "two-gpus")), *(member_from_api(claiming(f"s{i}")) for i in range(2))]
    assert placement(plan(index, group_of(("team", "mixed"), members, 3, 0.0))) == {"dra-1": 3}


def test_members_whose_claims_select_devices_differently_are_kept_apart_until_they_bind():
    picky = template("picky")
    picky[2]["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": f"device.driver == '{DRIVER}'"}}]
    objects = [device_class(), device_slice("dra-1", 4), device_slice("dra-2", 4), template(), picky]
    members = [member_from_api(claiming("plain")), member_from_api(claiming("choosy", "picky"))]
    outcome = plan(world(hosts("dra-1", "dra-2", gpus=None), objects), group_of(("team", "two"), members, 2, 0.0))
    assert sorted(placement(outcome).values()) == [1, 1]  # first-fit in either order could differ otherwise


def test_devices_a_reserved_members_claim_holds_serve_no_extended_resource_in_the_ledger():
    objects = [device_class("gpu.nvidia.com", extended="nvidia.com/gpu"), device_slice("dra-1", 8),
               template(count=4, device_class_name="gpu.nvidia.com")]
    held = with_labels(claiming("explicit", reserved_node="dra-1"), {names.GROUP_LABEL: "earlier"})
    index = world(hosts("dra-1", gpus=None), objects, pods=[held])
    assert index.ledger.free("dra-1")["nvidia.com/gpu"] == 4
    index.apply([(PODS, "team/explicit", None)])
    assert index.ledger.free("dra-1")["nvidia.com/gpu"] == 8


def test_a_pass_counts_the_devices_an_admitted_claim_group_takes_against_the_extended_resource():
    objects = [device_class("gpu.nvidia.com", extended="nvidia.com/gpu"), device_slice("dra-1", 8),
               template(count=4, device_class_name="gpu.nvidia.com")]
    index = world(hosts("dra-1", gpus=None), objects)
    claims = group_of(("team", "claims"), [member_from_api(claiming("c0"))], 1, 0.0)
    result = plan_pass([claims, gang_of("ext", 2, gpus=4)], index.pool, index.ledger, 10.0, occupancy=index.occupancy)
    assert [group.key[1] for group, _ in result.admitted] == ["claims"]
    assert result.ledger.free("dra-1")["nvidia.com/gpu"] == 4
    assert "needs 2 × 4 nvidia.com/gpu" in result.waiting[0].reason


def domain_device(name="nvl-1", devices=1):
    """One pool of devices that the nodes of an NVLink domain reach (the slice's node selector)."""
    selector = {"nodeSelectorTerms": [{"matchExpressions": [{"key": DOMAIN, "operator": "In", "values": [name]}]}]}
    return RESOURCE_SLICES, f"{name}-links", {
        "metadata": {"name": f"{name}-links"},
        "spec": {"driver": DRIVER, "nodeSelector": selector, "pool": {"name": name, "generation": 1,
                                                                      "resourceSliceCount": 1},
                 "devices": [{"name": f"link-{i}"} for i in range(devices)]}}


def shared_claim(name="link"):
    return RESOURCE_CLAIMS, f"team/{name}", {
        "metadata": {"name": name, "namespace": "team"},
        "spec": {"devices": {"requests": [{"name": "link", "exactly": {
            "deviceClassName": DRIVER, "allocationMode": "ExactCount", "count": 1}}]}}}


def sharing(name, size, claim="link"):
    """A group of `size` 8-GPU members all naming the ResourceClaim `claim`."""
    members = [member_from_api(with_spec(pod_object(f"{name}-{i}"), resourceClaims=[
        {"name": "link", "resourceClaimName": claim}])) for i in range(size)]
    return group_of(("team", name), members, size, 0.0)


def eight_nodes_four_in_the_domain():
    return [node(f"n{i}", gpus=8, labels={HOSTNAME: f"n{i}", **({DOMAIN: "nvl-1"} if i >= 4 else {})})
            for i in range(8)]


def test_a_group_sharing_a_claim_on_a_device_four_of_eight_nodes_reach_lands_on_those_four():
    index = world(eight_nodes_four_in_the_domain(), [device_class(), domain_device(), shared_claim()])
    assert placement(plan(index, sharing("train", 4))) == {"n4": 1, "n5": 1, "n6": 1, "n7": 1}
    too_many = plan(index, sharing("train", 5))
    assert isinstance(too_many, NoFit)
    assert too_many.reason.endswith("none of the 4 eligible nodes with room can allocate the claims of train-4 "
                                    "(4 resourceclaim not available on the node)")


def test_a_shared_claim_is_allocated_once_for_its_whole_group_and_its_device_is_taken_for_the_next():
    index = world([node(f"n{i}", gpus=24, labels={DOMAIN: "nvl-1"}) for i in range(4)],
                  [device_class(), domain_device(devices=2), *(shared_claim(name) for name in ("a", "b", "c"))])
    for name in ("a", "b"):
        admitted = plan(index, sharing(name, 4, claim=name))
        assert sum(placement(admitted).values()) == 4  # one device for the four: link-0, then link-1
        apply(admitted, index.ledger, index.occupancy, index.pool)
    outcome = plan(index, sharing("c", 1, claim="c"))
    assert isinstance(outcome, NoFit) and "cannot allocate all claims" in outcome.reason


# --- volumes --------------------------------------------------------------------------------------

def with_volume(pod, claim):
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return pod


def test_a_member_goes_where_its_bound_volume_may_be_used():
    nodes = [node("a1", zone="a"), node("b1", zone="b")]
    volume = {"spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["b"]}]}]}}}}
    index = world(nodes, [(PERSISTENT_VOLUME_CLAIMS, "team/data", {"spec": {"volumeName": "pv-b"}}),
                          (PERSISTENT_VOLUMES, "pv-b", volume)])
    group = group_of(("team", "v"), [member_from_api(with_volume(pod_object("v0", gpus=8), "data"))], 1, 0.0)
    assert placement(plan(index, group)) == {"b1": 1}
    missing = group_of(("team", "m"), [member_from_api(with_volume(pod_object("m0", gpus=8), "nope"))], 1, 0.0)
    outcome = plan(index, missing)
    assert isinstance(outcome, NoFit) and 'persistentvolumeclaim "nope" not found' in outcome.reason


def test_a_schedule_anyway_spread_is_a_preference_the_planner_follows_when_it_can():
    group = gang_of("s", 4, zone_spread("ScheduleAnyway", "s"), gpus=1)
    zones = Counter(node[0] for node in placement(plan(world(two_zones()), group)).elements())
    assert zones == {"a": 2, "b": 2}
    bare = world(two_zones())
    packed = Counter(node[0] for node in placement(plan_group(group, bare.pool, bare.ledger)).elements())
    assert packed == {"a": 4}  # without the preference, the planner packs one node


def test_extended_resource_members_do_not_take_devices_an_explicit_claim_holds():
    index = world(hosts("dra-1", gpus=None), [device_class("gpu.nvidia.com", extended="nvidia.com/gpu"),
                                              device_slice("dra-1", 8), template(count=4, device_class_name="gpu.nvidia.com")],
                  pods=[with_labels(claiming("explicit", reserved_node="dra-1"), {names.GROUP_LABEL: "earlier"})])
    assert isinstance(plan(index, gang_of("ext", 2, gpus=4)), NoFit)
