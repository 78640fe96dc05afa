"""What one pass hands back: its actions for the executor, the memory for the next pass, and the
figures the metrics read."""

from collections.abc import Mapping
from dataclasses import dataclass, field

from gangkeeper.controller.deciding.decisions import Action
from gangkeeper.controller.deciding.memory import Memory
from gangkeeper.controller.model.members import GroupKey


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
