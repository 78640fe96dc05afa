"""Pods that join a native PodGroup by the label `scheduling.k8s.io/pod-group` (as the 1.37 guides
write it). Where the API server serves `scheduling.k8s.io/v1beta1` PodGroups, the controller takes
the group's size from the PodGroup's `spec.schedulingPolicy.gang.minCount`; where it does not
(most clusters), it falls back to a Gang of that name or to the `gangkeeper.io/min-count`
annotation. Either way nothing is reserved until minCount members exist, then all of them are."""

import pytest

from gangkeeper import names
from sim.api import APIError
from tests.e2e.checks import (
    all_succeeded,
    assert_admitted_by_webhook,
    assert_placed_whole_and_succeeded,
    placed,
)
from tests.e2e.stack import Stack
from tests.e2e.workloads import new_team

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def native_stack(webhook, tmp_path_factory):
    """A second emulated cluster, a 1.37 one with the GenericWorkload gate on: it serves native
    PodGroups. It shares the webhook process (which never calls the API) and runs its own controller."""
    stack = Stack(webhook, tmp_path_factory.mktemp("native-stack"), native_pod_groups=True)
    yield stack
    stack.close()


def native_member(name: str, pod_group: str, **extra) -> dict:
    return {"name": name, "gpus": 1, "world_size": 3, "labels": {names.NATIVE_POD_GROUP_LABEL: pod_group}, **extra}


def pod_group(pod: dict) -> str:
    return pod["metadata"]["labels"][names.NATIVE_POD_GROUP_LABEL]


def test_served_native_podgroup_gives_the_min_count(native_stack):
    team = new_team(native_stack, "native-served", nodes=1)
    team.native_pod_group("trainers", min_count=3)
    team.pod(**native_member("trainer-0", "trainers"))
    team.pod(**native_member("trainer-1", "trainers"))

    team.wait_for_gang("trainers", "Waiting", present=2, minCount=3)  # minCount: the PodGroup's
    assert placed(team, team.pods().values()) == []

    team.pod(**native_member("trainer-2", "trainers"))
    team.wait_until(lambda: all_succeeded(team.pods(), 3), "the three members Succeeded")
    assert assert_admitted_by_webhook(team.pods_created(), source=names.SOURCE_NATIVE_POD_GROUP, count=3) == "trainers"
    assert_placed_whole_and_succeeded(team, "trainers", 3)
    team.wait_for_gang("trainers", "Succeeded", minCount=3)


def test_unserved_native_podgroup_falls_back_to_the_annotation_or_a_gang(stack):
    team = new_team(stack, "native-unserved", nodes=1)
    with pytest.raises(APIError) as unserved:
        team.native_pod_group("trainers", min_count=3)
    assert unserved.value.code == 404
    annotated = {names.MIN_COUNT_ANNOTATION: "3"}
    team.pod(**native_member("trainer-0", "trainers", annotations=annotated))
    team.pod(**native_member("trainer-1", "trainers", annotations=annotated))
    team.gang("evaluators", min_count=2)
    team.pod(**native_member("evaluator-0", "evaluators", world_size=2))
    team.pod(**native_member("evaluator-1", "evaluators", world_size=2))

    team.wait_for_gang("trainers", "Waiting", present=2, minCount=3)  # minCount: the annotation's
    team.wait_for_gang("evaluators", "Succeeded", minCount=2)  # minCount: the Gang's
    assert not placed(team, (pod for name, pod in team.pods().items() if name.startswith("trainer-")))

    team.pod(**native_member("trainer-2", "trainers", annotations=annotated))
    team.wait_until(lambda: all_succeeded(team.pods(), 5), "all five pods Succeeded")
    created = team.pods_created()
    for group, size in (("trainers", 3), ("evaluators", 2)):
        pods = {name: pod for name, pod in created.items() if pod_group(pod) == group}
        assert assert_admitted_by_webhook(pods, source=names.SOURCE_NATIVE_POD_GROUP, count=size) == group
        assert_placed_whole_and_succeeded(team, group, size)
    team.wait_for_gang("trainers", "Succeeded", minCount=3)
