"""The working state of one pass (`PassState`): what it decides on, and what it has decided so
far, group by group; and the few words every part of the pass writes alike.

The pass is pure: the parts (`reconciler`, `booking`, `rollback`, `preempting`, `resuming`,
`reporting`) add their actions, verdicts and figures here, and `reconciler` makes the `Outcome`
of it at the end.
"""

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from gangkeeper.controller.cache.groups import GangView, Workloads
from gangkeeper.controller.cache.index import ClusterIndex
from gangkeeper.controller.deciding import gangs
from gangkeeper.controller.deciding.capabilities import ApiCapabilities
from gangkeeper.controller.deciding.decisions import Action, Verdict
from gangkeeper.controller.deciding.memory import (
    Arrival,
    Asking,
    Channel,
    HeldOwner,
    Memory,
    News,
    Room,
    Strength,
    Told,
)
from gangkeeper.controller.deciding.settings import Settings
from gangkeeper.controller.model.members import GroupKey, Member
from gangkeeper.controller.model.objects import WorkloadKey
from gangkeeper.controller.planning.plans import NoFit
from gangkeeper.controller.planning.trees import Tree
from gangkeeper.resources import accelerator_count, accelerators
from gangkeeper.wording import first_of

if TYPE_CHECKING:  # the module that tells members imports this one
    from gangkeeper.controller.deciding.telling import Telling

NAMED = 10  # members a message names at most


@dataclass
class Remembered:
    """What the pass learns for the next one, group by group, as it goes (`memory.after_pass` makes
    the next `Memory` of it): what it reported on each channel, rollback backoff, when it wrote
    each Gang's status, since when groups are incomplete, when gated groups short of members last
    gained one, the owners it holds suspended, the groups given up, the room preemptors wait for,
    what running groups have placed and had and what each member was last told on itself."""

    rollbacks: dict[GroupKey, tuple[int, float]] = field(default_factory=dict)
    reported: dict[tuple[GroupKey, Channel], News] = field(default_factory=dict)
    status_written: dict[GroupKey, float] = field(default_factory=dict)
    incomplete_since: dict[GroupKey, float] = field(default_factory=dict)
    arrivals: dict[GroupKey, Arrival] = field(default_factory=dict)  # of gated groups short of members
    held: dict[WorkloadKey, HeldOwner] = field(default_factory=dict)
    given_up: dict[GroupKey, frozenset[str]] = field(default_factory=dict)
    preempting: dict[GroupKey, Room] = field(default_factory=dict)
    capacity: dict[GroupKey, Asking] = field(default_factory=dict)
    strengths: dict[GroupKey, Strength] = field(default_factory=dict)  # of groups admitted or running
    told: dict[GroupKey, dict[str, Told]] = field(default_factory=dict)  # by pod uid (`controller.deciding.telling`)
    waiting_for_tree: dict[GroupKey, float] = field(default_factory=dict)  # reserved children (`deciding.trees`)


@dataclass
class Figures:
    """What the pass counts for the metrics and for when the runner wakes (`Outcome`)."""

    released_after: list[tuple[GroupKey, float]] = field(default_factory=list)
    bound_after: list[float] = field(default_factory=list)
    rolled_back: set[GroupKey] = field(default_factory=set)
    preemptions: Counter = field(default_factory=Counter)  # victims by how they were taken
    stuck: Counter = field(default_factory=Counter)  # namespace → groups stuck incomplete
    due: list[float] = field(default_factory=list)  # moments a decision falls due by time alone
    # Capacity asked of an autoscaler, per ask: the namespace and the accelerators asked for.
    capacity_asked: list[tuple[str, dict[str, float]]] = field(default_factory=list)
    capacity_came: list[float] = field(default_factory=list)  # seconds each group waited for the capacity it asked
    capacity_failed: Counter = field(default_factory=Counter)  # asks that came to nothing, by how


@dataclass
class PassState:
    """Working state of one pass: what it decides on (the time, the settings, the memory of the
    last pass, the workloads, what the API server can do and the index), what it has decided so
    far per group (actions, verdicts, what took each victim's place), what it learns for the next
    pass (`remembered`) and what it counts (`figures`)."""

    now: float
    settings: Settings
    memory: Memory
    workloads: Workloads
    index: ClusterIndex  # whether a reserved member's node is free yet, its victims gone
    capabilities: ApiCapabilities = ApiCapabilities()
    decided: frozenset[GroupKey] = frozenset()  # the groups this pass decides (the pending views)
    actions: list[Action] = field(default_factory=list)
    verdicts: dict[GroupKey, Verdict] = field(default_factory=dict)
    preempted: dict[GroupKey, str] = field(default_factory=dict)  # what took each victim's place, this pass
    remembered: Remembered = field(default_factory=Remembered)
    figures: Figures = field(default_factory=Figures)
    # Where each group's Gang is (`gang_place`), found once: the pass asks for every group's twice, and
    # the workloads do not change while it decides.
    places: dict[GroupKey, tuple[GangView, gangs.GangPlace | None]] = field(default_factory=dict)
    trees: dict[GroupKey, Tree] = field(default_factory=dict)  # each tree as it stands, found once (`deciding.trees`)
    no_fits: dict[GroupKey, NoFit] = field(default_factory=dict)  # why each group the queue left waiting does not fit
    released: dict[GroupKey, dict[str, str]] = field(default_factory=dict)  # members released this pass: uid → node
    # What members are to be told this pass, before `telling.tell_chosen` picks the pass's share
    # (`controller.deciding.telling`).
    untold: list["Telling"] = field(default_factory=list)


def accelerators_held(state: PassState, members: Iterable[Member]) -> int:
    return accelerator_count((m.requests for m in members), state.settings.accelerator_patterns)


def accelerators_asked(state: PassState, requests: Mapping) -> list[tuple[str, float]]:
    """The accelerators in a set of requests, as the metrics count them."""
    return [(resource, float(amount))
            for resource, amount in accelerators(requests, state.settings.accelerator_patterns).items()]


def named(members: Sequence[Member]) -> str:
    return first_of(sorted(m.name for m in members), NAMED)


def rfc3339(moment: float) -> str:
    return datetime.fromtimestamp(moment, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
