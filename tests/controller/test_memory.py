"""What the controller remembers after a pass (controller/deciding/memory.py)."""

from collections import Counter

from gangkeeper.controller.cache.index import Pending
from gangkeeper.controller.deciding.decisions import Reason
from gangkeeper.controller.deciding.memory import Channel, Memory, News, Strength, Told, after_pass

UNDECIDED, GONE = ("team", "settled"), ("team", "gone")
BEFORE = Memory(first_seen={UNDECIDED: 1.0, GONE: 2.0}, rollbacks={UNDECIDED: (1, 9.0), GONE: (2, 9.0)},
                reported={(UNDECIDED, Channel.STATE): News(Reason.BOUND), (GONE, Channel.STATE): News(Reason.QUEUED),
                          (GONE, Channel.TIMEOUT): News(Reason.TIMED_OUT)},
                strengths={UNDECIDED: Strength(6, 8), GONE: Strength(4, 4)},
                told={UNDECIDED: {"uid-0": Told(Reason.NO_FIT, "nvidia.com/gpu")},
                      GONE: {"uid-1": Told(Reason.QUEUED)}},
                waiting_for_tree={UNDECIDED: 3.0, GONE: 4.0})


def remembered(complete: bool) -> Memory:
    pending = Pending(views=(), gone=frozenset({GONE}), settled_phases=Counter(), complete=complete)
    return after_pass(BEFORE, pending, 10.0, rollbacks=BEFORE.rollbacks, reported={}, incomplete_since={},
                      status_written={}, arrivals={}, strengths={}, told={}, waiting_for_tree={})


def test_an_incremental_pass_keeps_what_it_knew_of_groups_it_left_alone_and_forgets_the_gone():
    memory = remembered(complete=False)
    assert memory.first_seen == {UNDECIDED: 1.0} and memory.rollbacks == {UNDECIDED: (1, 9.0)}
    assert memory.reported == {(UNDECIDED, Channel.STATE): News(Reason.BOUND)}
    assert memory.strengths == {UNDECIDED: Strength(6, 8)}, "a degraded group left alone is still degraded"
    assert memory.told == {UNDECIDED: {"uid-0": Told(Reason.NO_FIT, "nvidia.com/gpu")}}, "its pods are not told again"
    assert memory.waiting_for_tree == {UNDECIDED: 3.0}, "a child left alone has waited for its tree since then"


def test_a_pass_that_decided_every_group_forgets_the_groups_it_did_not_see():
    memory = remembered(complete=True)
    assert (memory.first_seen, memory.rollbacks, memory.reported, memory.strengths, memory.told,
            memory.waiting_for_tree) == ({}, {}, {}, {}, {}, {})
