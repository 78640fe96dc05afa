"""Topology rules in the reconcile pass, on the stand-in API of tests/controller/test_rollback.py:
members planned after their group's admission (elastic ones beyond min count, replacements) are
held to the domain their group sits in."""

from gangkeeper import names
from gangkeeper.controller.deciding.settings import Settings
from tests.controller.builders import node_object
from tests.controller.owners import Owners
from tests.controller.world import CREATED, Run, booked, member_object

ZONE = "topology.kubernetes.io/zone"


def zoned_member(name: str) -> dict:
    """A 4-GPU member of the elastic group `train` (min count 2) that requires one zone."""
    pod = member_object(name, group="train", min_count=2, gpus=4, created=CREATED)
    pod["metadata"]["annotations"][names.TOPOLOGY_REQUIRED_ANNOTATION] = ZONE
    return pod


def test_a_member_beyond_min_count_goes_only_where_its_group_sits():
    # Zone a holds the first two exactly (best fit); the third would fit only in zone b.
    world = Owners([node_object("a-0", gpus=8, zone="a"), node_object("b-0", gpus=16, zone="b")])
    run = Run(world, Settings())
    for i in range(3):
        world.add(zoned_member(f"train-{i}"))
    reserved = {}
    for _ in range(4):
        for action in booked(run.step()):
            reserved[action.pod] = action.node
    assert sorted(reserved.values()) == ["a-0", "a-0"], "the third member is not sent to another zone"
