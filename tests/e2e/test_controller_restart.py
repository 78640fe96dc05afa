"""The controller is killed (SIGKILL) the moment its first gate removal of a group is committed, with
the rest of the group gated on their reservations or released by writes sent beside the first
(the controller has several in flight); another job arrives while it is down; it
is started again. It keeps no state of its own: the new process rebuilds the ledger from the
reservation annotations and pins, releases the rest of the group onto the nodes already reserved
for it, and books nothing twice: the new job would fit in what the group has reserved but not yet
bound, so it must wait until the group has finished."""

import signal

import pytest

from gangkeeper import names
from sim.api import WatchEvent
from sim.reservations import own_reservation
from tests.e2e.checks import assert_placed_whole_and_succeeded, group_label, members
from tests.e2e.stack import is_gated
from tests.e2e.workloads import new_team

pytestmark = pytest.mark.e2e


def test_a_controller_killed_mid_release_is_restarted_and_books_nothing_twice(stack):
    team = new_team(stack, "controller-restart", nodes=2, gpus_per_node=4)
    killed_in: list[str] = []  # the group whose release was under way

    def kill_at_the_first_release(event: WatchEvent) -> None:
        """Runs while the API server commits the release patch, before the controller hears the answer."""
        metadata = event.object["metadata"]
        if (not killed_in and event.resource == "pods" and metadata.get("namespace") == team.name
                and names.GROUP_LABEL in (metadata.get("labels") or {}) and not is_gated(event.object)):
            stack.kill_controller()
            killed_in.append(metadata["labels"][names.GROUP_LABEL])

    unsubscribe = stack.api.subscribe(kill_at_the_first_release)
    try:
        team.pytorchjob("llm-a", workers=3, gpus=2)  # 4 pods × 2 GPUs: the whole pool
        team.wait_until(lambda: killed_in, "the first member of llm-a released, and the controller killed")
    finally:
        unsubscribe()
    try:
        assert stack.controller.popen.wait(timeout=10) == -signal.SIGKILL
        (group,) = killed_in
        interrupted = members(team, group)
        # The releases go out side by side: those already sent beside the first may land too.
        assert len([pod for pod in interrupted if not is_gated(pod)]) >= 1, "killed after its first release"
        assert all(stack.booked.node_for(pod) and not own_reservation(pod) for pod in interrupted), \
            "every member reserved, in one write on the Gang"

        team.pytorchjob("llm-b", workers=2, gpus=2)  # 6 GPUs: what llm-a has reserved but not yet bound
        team.wait_until(lambda: len(team.pods()) == 7, "llm-b's pods created, gated")
    finally:
        stack.start_controller()  # the same identity: it holds the Lease already and leads at once

    team.wait_for_workload("pytorchjobs", "llm-a", "Succeeded")
    team.wait_for_workload("pytorchjobs", "llm-b", "Succeeded")
    for job, size in (("llm-a", 4), ("llm-b", 3)):
        pods = [pod for name, pod in team.pods().items() if name.startswith(f"{job}-")]
        assert_placed_whole_and_succeeded(team, group_label(pods), size)
    assert group_label(pod for name, pod in team.pods().items() if name.startswith("llm-a-")) == group
    reservations = stack.reservations
    assert all(len(reservations[pod["metadata"]["uid"]]) == 1 for pod in team.pods().values()), \
        "every member was reserved on one node, once"
