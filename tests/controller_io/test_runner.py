"""The controller's loop on a fake clock: what one turn does, when the next one is due, and that
`run()` turns exactly when `due()` says, waiting only through the clock it was given. Its writes
reach the emulated API server (`tests.controller_io.loop`)."""

import threading

from gangkeeper.controller import runner
from gangkeeper.controller.deciding.decisions import Reserve
from gangkeeper.controller.deciding.outcome import HELD_RELEASE_RETRY_SECONDS
from gangkeeper.controller.deciding.settings import Settings
from gangkeeper.controller.reading import kube
from gangkeeper.controller.runner import Controller
from study.adapter import InProcessKube
from tests.controller_io.loop import (
    CONSISTENCY,
    DEBOUNCE,
    NS,
    RESYNC,
    START,
    AuditEvents,
    FakeClock,
    World,
    controller,
    member,
    node,
    released,
    reserved,
)


def reserve_and_release_a_pair(clock: FakeClock, resync: float = RESYNC) -> tuple[Controller, World]:
    """Two turns: the pair reserved, then released (each turn at once after the one before)."""
    world = World(clock)
    loop = controller(clock, world, resync)
    clock.now = START + 1
    world.add(node("n0"))
    clock.now = START + 2
    world.add(member("pair-0"), member("pair-1"))
    assert loop.due() == START + 1 + DEBOUNCE, "the first change counts: the burst after it is batched"
    assert reserved(loop.turn(lambda: True)) == {"pair-0", "pair-1"}
    assert sorted(world.gang("pair")["status"]["reservations"]) == ["pair-0", "pair-1"], "in one write"
    assert loop.due() == clock.now, "the reservation was written: the next turn at once"
    assert released(loop.turn(lambda: True)) == {"pair-0", "pair-1"}
    assert loop.due() == clock.now
    assert world.pod_writes() == ["pair-0", "pair-1"], \
        "released what it had just reserved, without writing the pods first"
    return loop, world


def test_a_turn_is_due_a_debounce_after_a_change_at_once_after_pod_writes_and_else_at_the_resync():
    clock = FakeClock()
    loop = controller(clock, World(clock))
    assert loop.due() == START + RESYNC + DEBOUNCE, "nothing changed: a resync"
    loop, world = reserve_and_release_a_pair(clock)
    loop.turn(lambda: True)
    assert world.pod_writes()[2:] == [], "the released members wait for the scheduler: nothing written"
    assert loop.due() == clock.now + RESYNC + DEBOUNCE, "the resync comes before the bind timeout"
    clock.now += 1
    world.deliver("pods", "pair-0")
    assert loop.due() == clock.now + DEBOUNCE
    assert loop.failed_actions == 0


def test_the_loop_wakes_when_a_timeout_falls_due_before_the_resync():
    clock = FakeClock()
    bind_timeout = Settings().bind_timeout_seconds
    loop, world = reserve_and_release_a_pair(clock, resync=10 * bind_timeout)
    loop.turn(lambda: True)
    assert world.pod_writes()[2:] == []
    assert loop.due() == clock.now + bind_timeout + DEBOUNCE, "when the released members' bind timeout ends"


def test_a_follower_keeps_its_index_warm_and_decides_nothing_until_it_leads():
    clock = FakeClock()
    world = World(clock)
    loop = controller(clock, world)
    world.add(node("n0"))
    world.add(member("pair-0"), member("pair-1"))
    assert loop.turn(lambda: False) is None
    assert world.pod_writes() == [] and world.api.list(kube.GANGS.name) == []
    assert loop.due() == clock.now + RESYNC + DEBOUNCE
    assert reserved(loop.turn(lambda: True)) == {"pair-0", "pair-1"}


def test_a_replica_that_lost_the_lead_forgets_the_timeouts_it_was_waking_for():
    clock = FakeClock()
    bind_timeout = Settings().bind_timeout_seconds
    loop, _ = reserve_and_release_a_pair(clock, resync=10 * bind_timeout)
    loop.turn(lambda: True)
    clock.now += 2 * bind_timeout  # the bind timeout is past, and the lead was lost meanwhile
    assert loop.turn(lambda: False) is None
    assert loop.due() == clock.now + 10 * bind_timeout + DEBOUNCE, "a resync, not a turn every debounce"


def test_the_index_is_rebuilt_from_the_caches_when_a_consistency_check_is_due():
    clock = FakeClock()
    world = World(clock)
    loop = controller(clock, world)
    world.add(node("n0"))
    loop.turn(lambda: True)
    world.add(member("quiet-0", "quiet"), member("quiet-1", "quiet"), told=False)
    clock.now = START + CONSISTENCY / 2
    assert reserved(loop.turn(lambda: True)) == set(), "the incremental index never heard of them"
    assert loop.metrics.registry.get_sample_value("gangkeeper_index_inconsistencies_total") == 0
    clock.now = START + CONSISTENCY
    assert reserved(loop.turn(lambda: True)) == {"quiet-0", "quiet-1"}, "decided on the rebuilt index"
    assert loop.metrics.registry.get_sample_value("gangkeeper_index_inconsistencies_total") == 1


def test_run_turns_when_due_waiting_only_through_its_clock_and_ends_when_told_to_stop():
    clock = FakeClock()
    world = World(clock)
    loop = controller(clock, world)
    stop, turned, turn = threading.Event(), [], loop.turn

    def recorded(is_leader):
        turned.append(clock.now)
        if len(turned) == 3:
            stop.set()
        return turn(is_leader)

    loop.turn = recorded
    first = START + RESYNC + DEBOUNCE
    clock.at(first + 7, lambda: world.add(node("n0")))
    loop.run(stop, lambda: True)
    assert turned == [first, first + 7 + DEBOUNCE, first + 7 + DEBOUNCE + RESYNC + DEBOUNCE]
    assert "n0" in loop.index.pool.nodes, "the change that woke the loop reached the index"


def reserve_a_pair(clock: FakeClock, audit: AuditEvents | None = None) -> tuple[Controller, World]:
    """One turn: the pair reserved on its Gang, created with the reservations."""
    world = World(clock)
    loop = controller(clock, world, audit=audit)
    world.add(node("n0"))
    world.add(member("pair-0"), member("pair-1"))
    assert reserved(loop.turn(lambda: True)) == {"pair-0", "pair-1"}
    return loop, world


def test_a_consistency_check_keeps_the_gang_this_leader_reserved_on_until_its_watch_shows_it():
    clock = FakeClock()
    loop, world = reserve_a_pair(clock)
    clock.now = START + CONSISTENCY  # a rebuild from the caches, where the Gang is not yet
    assert released(loop.turn(lambda: True)) == {"pair-0", "pair-1"}, "still reserved after the rebuild"
    assert loop.metrics.registry.get_sample_value("gangkeeper_index_inconsistencies_total") == 0
    assert list(loop._assumed_gangs) == [f"{NS}/pair"]
    world.deliver(kube.GANGS.name)  # the watch catches up: the caches stand for it from now on
    assert loop._assumed_gangs == {}


def test_a_member_created_again_behind_the_caches_back_holds_its_whole_group_until_the_cache_catches_up():
    loop, world = reserve_a_pair(FakeClock())  # pair-1 reserved as the pod it was
    world.api.delete("pods", "pair-1", namespace=NS)  # deleted and created again; the pods' watch has not said so yet
    world.api.create("pods", member("pair-1"))
    loop.turn(lambda: True)
    assert world.pod_writes() == [], "pair-0 is not released without pair-1"
    world.deliver("pods")  # the cache catches up: the new pair-1 is planned, then the pair released
    assert reserved(loop.turn(lambda: True)) == {"pair-1"}
    assert released(loop.turn(lambda: True)) == {"pair-0", "pair-1"}
    assert sorted(world.pod_writes()) == ["pair-0", "pair-1"]


def test_a_release_held_back_is_tried_again_within_a_second_and_on_record_when_it_goes_through():
    clock, audit = FakeClock(), AuditEvents()
    loop, world = reserve_a_pair(clock, audit)
    world.api.patch("pods", "pair-1", {"metadata": {"annotations": {"touched": "by someone"}}},
                    namespace=NS)  # changed by someone; the pods' watch has not said so yet
    loop.turn(lambda: True)
    assert world.pod_writes() == [] and "gang.released" not in audit.events
    assert loop.due() <= clock.now + HELD_RELEASE_RETRY_SECONDS + DEBOUNCE, "not at the next resync"
    world.deliver("pods")
    assert released(loop.turn(lambda: True)) == {"pair-0", "pair-1"}
    assert audit.events.count("gang.released") == 1, "the release that went through is on record"
    assert loop.metrics.registry.get_sample_value("gangkeeper_complete_to_released_seconds_count") == 1


class PruningKube(InProcessKube):
    """The API server's Gang CRD is of an older version: its schema prunes status.reservations
    (the emulation keeps every field of a custom resource, so they are left out on the way)."""

    def patch_status(self, resource, namespace, name, body, patch_type=kube.MERGE_PATCH):
        status = {key: value for key, value in body["status"].items() if key != "reservations"}
        return super().patch_status(resource, namespace, name, {"status": status}, patch_type)


def test_a_gang_crd_that_prunes_reservations_turns_the_controller_to_reserving_on_each_member(caplog):
    clock = FakeClock()
    world = World(clock, PruningKube)
    loop = controller(clock, world)
    world.add(node("n0"))
    world.add(member("pair-0"), member("pair-1"))
    assert reserved(loop.turn(lambda: True)) == {"pair-0", "pair-1"}, "on the Gang, which lost them"
    assert "reservations" not in world.gang("pair")["status"]
    assert "prunes status.reservations" in caplog.text
    on_members = loop.turn(lambda: True)
    assert {action.pod for action in on_members.actions if isinstance(action, Reserve)} == {"pair-0", "pair-1"}
    assert released(loop.turn(lambda: True)) == {"pair-0", "pair-1"}


def test_a_crd_found_to_prune_reservations_is_remembered_across_a_rebuild_of_the_index():
    clock = FakeClock()
    world = World(clock, PruningKube)
    loop = controller(clock, world)
    world.add(node("n0"))
    world.add(member("pair-0"), member("pair-1"))
    loop.turn(lambda: True)  # reserved on the Gang, which lost them
    clock.now = START + CONSISTENCY  # the index rebuilt from the caches before the next pass
    on_members = loop.turn(lambda: True)
    assert {action.pod for action in on_members.actions if isinstance(action, Reserve)} == {"pair-0", "pair-1"}


def test_the_first_sync_only_freezes_what_the_caches_hold_and_a_consistency_check_collects_first(monkeypatch):
    """Nothing a relist makes is cyclic garbage, and a full collection over it is half a second of
    a restart at 15,000 nodes; the index a consistency check replaces is collected."""
    calls = []
    for name in ("collect", "freeze", "unfreeze"):
        monkeypatch.setattr(runner.gc, name, lambda *_, name=name: calls.append(name))
    clock = FakeClock()
    world = World(clock)
    loop = controller(clock, world)
    world.add(node("n0"))
    loop.turn(lambda: True)
    loop.turn(lambda: True)
    assert calls == ["freeze"], "once, when the caches first synced"
    loop.check_consistency()
    assert calls == ["freeze", "unfreeze", "collect", "freeze"]
