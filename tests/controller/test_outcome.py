"""A pass's outcome as the executor carried it out (controller/deciding/outcome.py)."""

from dataclasses import replace

from gangkeeper.controller.deciding.decisions import Reason
from gangkeeper.controller.deciding.memory import Channel, Memory, News, Told
from gangkeeper.controller.deciding.outcome import HELD_RELEASE_RETRY_SECONDS, Outcome, carried_out

HELD, RELEASED = ("team", "held"), ("team", "released")
NOW = 1_800_000_000.0
DECIDED = Outcome(actions=(), phases={}, reserved_accelerators=0, rollbacks=0, next_due=NOW + 60,
                  memory=Memory(reported={(HELD, Channel.STATE): News(Reason.RELEASED),
                                          (HELD, Channel.TIMEOUT): News(Reason.TIMED_OUT),
                                          (RELEASED, Channel.STATE): News(Reason.RELEASED)},
                                told={HELD: {"uid-0": Told(Reason.RELEASED, "n0"), "uid-1": Told(Reason.NO_FIT)},
                                      RELEASED: {"uid-2": Told(Reason.RELEASED, "n1")}}),
                  released_after=((HELD, 3.0), (RELEASED, 4.0)), waited=((HELD, 30.0), (RELEASED, 40.0)))


def test_a_group_whose_releases_were_held_back_was_not_released_by_the_pass():
    carried = carried_out(DECIDED, {HELD}, NOW)
    assert carried.released_after == ((RELEASED, 4.0),) and carried.waited == ((RELEASED, 40.0),), \
        "counted by the pass that releases it"
    assert carried.memory.reported == {(HELD, Channel.TIMEOUT): News(Reason.TIMED_OUT),
                                       (RELEASED, Channel.STATE): News(Reason.RELEASED)}, \
        "its release is reported by the pass that makes it"
    assert carried.next_due == NOW + HELD_RELEASE_RETRY_SECONDS
    assert carried.memory.told == {HELD: {"uid-1": Told(Reason.NO_FIT)},
                                   RELEASED: {"uid-2": Told(Reason.RELEASED, "n1")}}, \
        "its members are told of their release by the pass that makes it"


def test_the_release_held_back_is_tried_again_unless_a_timeout_falls_due_sooner():
    assert carried_out(replace(DECIDED, next_due=None), {HELD}, NOW).next_due == NOW + HELD_RELEASE_RETRY_SECONDS
    assert carried_out(replace(DECIDED, next_due=NOW + 0.5), {HELD}, NOW).next_due == NOW + 0.5


def test_a_pass_carried_out_whole_is_its_outcome():
    assert carried_out(DECIDED, frozenset(), NOW) is DECIDED
