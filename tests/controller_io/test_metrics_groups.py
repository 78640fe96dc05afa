"""The metrics by namespace, read from the registry after turns of the controller's loop: groups
by namespace and phase (settled groups too, which a pass no longer decides), the accelerators
waiting groups request, the longest wait, and a namespace's series gone with its last group."""

from datetime import datetime, timezone

from gangkeeper.controller.metrics import PHASES, GroupPhases
from gangkeeper.controller.reading.informer import object_key
from tests.controller_io.test_runner import WALL, FakeClock, FakeKube, controller, member, node, released, submit


def leading() -> bool:
    return True


def pod(name: str, namespace: str, group: str, size: int = 2, created: float = WALL) -> dict:
    obj = member(name, group, size)
    obj["metadata"]["namespace"] = namespace
    obj["metadata"]["uid"] = f"uid-{namespace}-{name}"
    obj["metadata"]["creationTimestamp"] = datetime.fromtimestamp(created, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return obj


def bind(loop, api: FakeKube, namespace: str, *pods: str) -> None:
    """The scheduler binds released members to the node they are pinned to, and they run."""
    for name in pods:
        obj = api.pods[f"{namespace}/{name}"]
        assert not obj["spec"].get("schedulingGates"), f"{name} is still gated"
        obj = {**obj, "spec": {**obj["spec"], "nodeName": "n0"}, "status": {"phase": "Running"},
               "metadata": {**obj["metadata"], "resourceVersion": str(int(obj["metadata"]["resourceVersion"]) + 1)}}
        api.pods[object_key(obj)] = obj
        loop.pods.add(obj)


def delete(loop, api: FakeKube, namespace: str, *pods: str) -> None:
    for name in pods:
        del api.pods[f"{namespace}/{name}"]
        loop.pods.cache.remove(f"{namespace}/{name}")
        loop.pods.on_change("pods")


def sample(loop, name: str, **labels) -> float | None:
    return loop.metrics.registry.get_sample_value(name, labels)


def groups(loop, namespace: str) -> dict[str, float | None]:
    return {phase: sample(loop, "gangkeeper_groups", namespace=namespace, phase=phase) for phase in PHASES}


def test_groups_are_counted_by_namespace_and_phase_also_once_settled_and_not_decided_again():
    clock, api = FakeClock(), FakeKube()
    loop = controller(clock, api)
    loop.nodes.add(node("n0"))
    submit(loop, api, pod("pair-0", "ml", "pair"), pod("pair-1", "ml", "pair"), pod("solo-0", "vision", "solo"))
    first = loop.turn(leading)
    assert groups(loop, "ml") == {"Waiting": 0, "Admitted": 1, "Running": 0, "Succeeded": 0, "Failed": 0}
    assert groups(loop, "vision") == {"Waiting": 1, "Admitted": 0, "Running": 0, "Succeeded": 0, "Failed": 0}, \
        "1 of 2 members: incomplete"
    assert sum(first.phases.values()) == 2
    assert released(loop.turn(leading)) == {"pair-0", "pair-1"}
    bind(loop, api, "ml", "pair-0", "pair-1")
    loop.turn(leading)
    assert groups(loop, "ml")["Running"] == 1
    clock.now += 60
    quiet = loop.turn(leading)
    assert ("ml", "pair") not in quiet.decided_phases, "settled: this pass did not decide it"
    assert groups(loop, "ml")["Running"] == 1 and groups(loop, "ml")["Admitted"] == 0, "still counted, in its phase"
    assert quiet.phases == {"Running": 1, "Waiting": 1}, "the same groups as the totals"


def test_waiting_accelerators_and_the_longest_wait_are_by_namespace_and_resource():
    clock, api = FakeClock(), FakeKube()
    loop = controller(clock, api)
    submit(loop, api, pod("big-0", "ml", "big", created=WALL - 100), pod("big-1", "ml", "big", created=WALL - 100),
           pod("solo-0", "vision", "solo", created=WALL - 30))
    loop.turn(leading)
    waiting = {namespace: sample(loop, "gangkeeper_waiting_accelerators", namespace=namespace,
                                 resource="nvidia.com/gpu") for namespace in ("ml", "vision")}
    assert waiting == {"ml": 8, "vision": 4}, "no node: both wait, with every member's GPUs"
    assert sample(loop, "gangkeeper_longest_wait_seconds", namespace="ml") == clock.wall() - (WALL - 100)
    assert sample(loop, "gangkeeper_longest_wait_seconds", namespace="vision") == clock.wall() - (WALL - 30)
    loop.nodes.add(node("n0"))
    loop.turn(leading)
    assert groups(loop, "ml")["Admitted"] == 1
    assert sample(loop, "gangkeeper_waiting_accelerators", namespace="ml", resource="nvidia.com/gpu") == 0, \
        "admitted: no longer demand that waits"
    assert sample(loop, "gangkeeper_longest_wait_seconds", namespace="ml") == 0
    assert sample(loop, "gangkeeper_waiting_accelerators", namespace="vision", resource="nvidia.com/gpu") == 4


def test_a_namespace_without_groups_has_no_series_left_but_its_waits():
    clock, api = FakeClock(), FakeKube()
    loop = controller(clock, api)
    loop.nodes.add(node("n0"))
    submit(loop, api, pod("pair-0", "ml", "pair"), pod("pair-1", "ml", "pair"), pod("solo-0", "vision", "solo"))
    loop.turn(leading)
    loop.turn(leading)
    assert sample(loop, "gangkeeper_group_wait_seconds_count", namespace="ml") == 1
    delete(loop, api, "ml", "pair-0", "pair-1")
    delete(loop, api, "vision", "solo-0")
    loop.turn(leading)
    assert groups(loop, "ml") == dict.fromkeys(PHASES), "no series left for the namespace"
    assert groups(loop, "vision") == dict.fromkeys(PHASES)
    assert sample(loop, "gangkeeper_waiting_accelerators", namespace="vision", resource="nvidia.com/gpu") is None
    assert sample(loop, "gangkeeper_longest_wait_seconds", namespace="vision") is None
    assert sample(loop, "gangkeeper_group_wait_seconds_count", namespace="ml") == 1, "a histogram is never reset"


def test_group_phases_follow_decided_groups_forget_gone_ones_and_start_over_on_a_complete_pass():
    phases = GroupPhases()
    assert phases.update({("a", "x"): "Waiting", ("b", "y"): "Running"}, (), True) == {
        ("a", "Waiting"): 1, ("b", "Running"): 1}
    assert phases.update({("a", "x"): "Admitted"}, (), False) == {("a", "Admitted"): 1, ("b", "Running"): 1}
    assert phases.update({}, [("b", "y")], False) == {("a", "Admitted"): 1}
    assert phases.namespaces == {"a"}
    assert phases.update({("c", "z"): "Failed"}, (), True) == {("c", "Failed"): 1}, "a complete pass is all there is"


def test_a_degraded_group_is_counted_by_namespace_also_once_settled_and_not_decided_again():
    clock, api = FakeClock(), FakeKube()
    loop = controller(clock, api)
    loop.nodes.add(node("n0"))
    submit(loop, api, pod("duo-0", "ml", "duo", size=1), pod("duo-1", "ml", "duo", size=1))  # one elastic extra
    for _ in range(3):
        loop.turn(leading)
        bind(loop, api, "ml", *(name for name in ("duo-0", "duo-1") if not api.pods[f"ml/{name}"]["spec"].get(
            "schedulingGates") and not api.pods[f"ml/{name}"]["spec"].get("nodeName")))
    loop.turn(leading)
    assert sample(loop, "gangkeeper_degraded_groups", namespace="ml") == 0
    delete(loop, api, "ml", "duo-1")
    loop.turn(leading)
    assert sample(loop, "gangkeeper_degraded_groups", namespace="ml") == 1, "1 of the 2 it had, min 1"
    clock.now += 60
    quiet = loop.turn(leading)
    assert ("ml", "duo") not in quiet.decided_phases and sample(loop, "gangkeeper_degraded_groups", namespace="ml") == 1
