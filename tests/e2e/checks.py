"""What the end-to-end tests assert on the cluster's state, said once."""

from collections.abc import Iterable

from gangkeeper import names
from tests.e2e.stack import is_gated
from tests.e2e.workloads import Team


def group_label(pods: Iterable[dict]) -> str:
    """The one group the pods share."""
    groups = {(pod["metadata"].get("labels") or {}).get(names.GROUP_LABEL) for pod in pods}
    assert len(groups) == 1, f"the pods name {len(groups)} groups: {groups}"
    return groups.pop()


def assert_admitted_by_webhook(created: dict[str, dict], *, source: str, count: int) -> str:
    """`count` pods, each stored gated and labelled with one group that the webhook found from `source`;
    returns the group."""
    assert len(created) == count, sorted(created)
    for name, pod in created.items():
        assert is_gated(pod), f"{name} was stored without the gate {names.SCHEDULING_GATE}"
        assert pod["metadata"]["annotations"][names.GROUP_SOURCE_ANNOTATION] == source, name
        assert not pod["spec"].get("nodeName")
    return group_label(created.values())


def assert_untouched(created: dict[str, dict]) -> None:
    """No gate, no gangkeeper label or annotation: the webhook never changed these pods."""
    assert created
    for name, pod in created.items():
        assert not pod["spec"].get("schedulingGates"), name
        keys = [*(pod["metadata"].get("labels") or {}), *(pod["metadata"].get("annotations") or {})]
        assert not [key for key in keys if key.startswith(f"{names.DOMAIN}/")], (name, keys)


def members(team: Team, group: str) -> list[dict]:
    return [pod for pod in team.pods().values()
            if (pod["metadata"].get("labels") or {}).get(names.GROUP_LABEL) == group]


def assert_placed_whole_and_succeeded(team: Team, group: str, size: int) -> None:
    """The group's `size` members were all placed (reserved or bound) when the first was bound, each
    was bound to the node it was reserved on, and each succeeded; no invariant broke in the namespace."""
    assert team.violations() == []
    assert team.stack.invariants.checker.first_bound[(team.name, group)] == (size, size), \
        "placed, members at first bind"
    pods = members(team, group)
    assert len(pods) == size
    for pod in pods:
        reserved = team.stack.reservations[pod["metadata"]["uid"]][-1]
        assert pod["spec"]["nodeName"] == reserved, pod["metadata"]["name"]
        assert pod["status"]["phase"] == "Succeeded", pod["metadata"]["name"]


def all_succeeded(pods: dict[str, dict], count: int) -> bool:
    return len(pods) == count and all((p.get("status") or {}).get("phase") == "Succeeded" for p in pods.values())


def placed(team: Team, pods: Iterable[dict]) -> list[str]:
    """The pods that are bound or hold a reservation (of their own, or on their Gang)."""
    return [pod["metadata"]["name"] for pod in pods if pod["spec"].get("nodeName") or team.stack.booked.node_for(pod)]
