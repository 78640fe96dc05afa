"""What one pass hands back: its actions for the executor, the memory for the next pass, and the
figures the metrics read; and that outcome as the executor carried it out (`carried_out`).

The executor does what the pass decided but for one thing it may hold back: a group's releases,
when a member changed since the pass read it (`controller.acting.executor`). It says so in what
it hands back, and `carried_out` is the one way that reaches the memory, the loop and the metrics.
"""

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace

from gangkeeper.controller.deciding.decisions import Action
from gangkeeper.controller.deciding.memory import Memory, unreported
from gangkeeper.controller.model.members import GroupKey

# A group whose releases were held back is tried again this soon, whether or not the cache has
# caught up by then: its watch usually has, within milliseconds.
HELD_RELEASE_RETRY_SECONDS = 1.0


@dataclass(frozen=True)
class Outcome:
    actions: tuple[Action, ...]
    memory: Memory
    phases: Mapping[str, int]
    reserved_accelerators: int
    released_after: tuple[tuple[GroupKey, float], ...]  # (group, seconds from complete) of each first release
    rollbacks: int
    # The earliest moment a decision falls due by time alone (a bind or incomplete timeout): the
    # runner wakes then rather than at its next resync, so a timeout is acted on when it expires.
    next_due: float | None = None
    preemptions: Mapping[str, int] = field(default_factory=dict)  # victims by how they were taken
    # What the metrics read by namespace. A pass decides only the groups under way or changed, so
    # counting every group by namespace takes keeping, from pass to pass, the phase of each group
    # decided (`decided_phases`) and forgetting those gone; a `complete` pass decided every group.
    decided_phases: Mapping[GroupKey, str] = field(default_factory=dict)
    gone: frozenset[GroupKey] = frozenset()
    complete: bool = False
    # (group, seconds from first seen) of each group whose wait this pass's release ended.
    waited: tuple[tuple[GroupKey, float], ...] = ()
    # The accelerators the live members of waiting groups request, by (namespace, resource), and
    # how long the longest-waiting group of each namespace has waited so far. Waiting groups are
    # under way, so each pass decides all of them: these are whole.
    waiting_accelerators: Mapping[tuple[str, str], float] = field(default_factory=dict)
    longest_wait: Mapping[str, float] = field(default_factory=dict)
    # Seconds from complete to seen bound (min count of its members), of each group this pass first
    # saw running since it was last complete: the latency the scheduler's users see.
    bound_after: tuple[float, ...] = ()
    # Groups stuck incomplete (`controller.deciding.incomplete`), by namespace: each such group is under way,
    # so each pass decides all of them and this is whole.
    stuck_incomplete: Mapping[str, int] = field(default_factory=dict)
    # Capacity asked of an autoscaler (`controller.deciding.provisioning`): each ask made (its
    # namespace and the accelerators asked for), the seconds each group placed on what it asked for
    # had waited, and the asks that came to nothing by how (the autoscaler's answer, or placeholders
    # not bound in time).
    capacity_asked: tuple[tuple[str, Mapping[str, float]], ...] = ()
    capacity_came: tuple[float, ...] = ()
    capacity_failed: Mapping[str, int] = field(default_factory=dict)
    # Running groups with fewer members placed than they had (`controller.deciding.elastic`), by
    # namespace: counted from the memory, which keeps what it knew of the groups a pass left alone.
    degraded: Mapping[str, int] = field(default_factory=dict)


def carried_out(outcome: Outcome, held: Collection[GroupKey], now: float) -> Outcome:
    """`outcome` as carried out at `now`, `held` the groups whose releases the executor held back.

    Those groups were not released by this pass: the memory forgets having reported their state,
    so that the pass that releases them reports it (an Event and an audit line, once); their
    release is not this pass's figure (complete to released, the end of their wait), so that it
    is counted once, by that pass; and that pass comes within `HELD_RELEASE_RETRY_SECONDS`.
    """
    if not held:
        return outcome
    again = now + HELD_RELEASE_RETRY_SECONDS
    return replace(outcome, memory=unreported(outcome.memory, held),
                   released_after=tuple(entry for entry in outcome.released_after if entry[0] not in held),
                   waited=tuple(entry for entry in outcome.waited if entry[0] not in held),
                   next_due=again if outcome.next_due is None else min(outcome.next_due, again))
