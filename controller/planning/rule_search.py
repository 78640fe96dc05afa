"""A group's own topology rule: a group that declares one (`Group.topology`, a
`model.members.TopologyRule`) is placed by it instead of by the cluster's `Topology`
(`planning.planner`); the packing inside a domain is the same (`planning.packing`).
What each domain of a label offers is counted once per plan from the class's room by free
accelerators (`planning.domains.DomainRoom`), and domains are chosen BestFit (partly used
first, then fewest accelerators left free; `planning.domains`). The scopes tried, in order:
  - `required` alone: each domain that holds the group, best first; none: a NoFit naming every
    domain's free accelerators. Nodes without the label never qualify.
  - `preferred` alone: each domain that holds the group, best first; then as few domains as hold
    it together; then anywhere. A group with spread constraints has no preferred domain.
  - both: domains of `preferred` inside one of `required` that hold the group, best first; then
    per domain of `required`, best first, as few of `preferred` as hold it, then the whole domain.
  - `slice_required` with `slice_size`, inside each scope: the group's live members ordered by
    `Member.rank` in consecutive slices, each placed in turn in the BestFit domain of the slice
    label that takes it, counting what the earlier slices took (at most `SLICE_TRIES` domains a
    slice). Members reserved before a restart hold their required domain and their slice's.
Placing one at a time (devices, neighbours), at most `ONE_BY_ONE_TRIES` domains a level are tried.
"""

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from math import floor

from gangkeeper.controller.cache.capacity import Ledger
from gangkeeper.controller.cache.occupancy import Occupancy
from gangkeeper.controller.checks.eligibility import NodePool
from gangkeeper.controller.model.members import Group, Member
from gangkeeper.controller.planning.classes import MemberClass, device_bound, fits_somewhere, one_by_one
from gangkeeper.controller.planning.domains import DomainRoom, best_fit, fewest, noun, shortage, slices
from gangkeeper.controller.planning.nofit import no_fit
from gangkeeper.controller.planning.packing import place, place_into, uncount
from gangkeeper.controller.planning.plans import Assignment, NoFit, Plan, Scope
from gangkeeper.resources import Resources

ONE_BY_ONE_TRIES = 3  # domains tried at each level when members are placed one at a time
SLICE_TRIES = 8  # domains one slice is tried in, at most, in BestFit order


def plan_by_rule(group: Group, classes: Sequence[MemberClass], pool: NodePool, ledger: Ledger,
                 occupancy: Occupancy | None) -> Plan | NoFit:
    """The group's rule instead of the cluster's `Topology` (module docstring)."""
    singly = occupancy is not None and any(one_by_one(cls, occupancy) for cls in classes)
    if occupancy is not None and not singly and not any(device_bound(cls, occupancy) for cls in classes):
        occupancy = None  # only resources and node rules decide for every member
    return _RuleSearch(group, classes, pool, ledger, occupancy, singly).plan()


class _RuleSearch:
    """The scopes a group with a rule is tried in, best first, and with slices a domain for each
    slice inside the scope; what each label's domains offer is counted once (`DomainRoom`)."""

    def __init__(self, group: Group, classes: Sequence[MemberClass], pool: NodePool, ledger: Ledger,
                 occupancy: Occupancy | None, one_by_one: bool):
        self.group, self.classes, self.pool, self.ledger, self.occupancy = group, classes, pool, ledger, occupancy
        self.rule = group.topology
        # The classes the rooms count, each with its accelerator.
        self.packed = [(cls, cls.accelerator) for cls in classes if cls.accelerator]
        self.need = [len(cls.members) for cls, _ in self.packed]
        self.count = sum(len(cls.members) for cls in classes)
        self.tries = ONE_BY_ONE_TRIES if one_by_one else None
        self.best: list[Assignment] = []  # the attempt that placed the most members
        self.reason: Callable[[], str] | None = None  # why no domain holds the group, when the counts show it
        self.fallback: Scope = None  # where the members that fit would go when none holds the group
        self._rooms_of: dict[tuple[str, Scope], dict[str, DomainRoom]] = {}

    def plan(self) -> Plan | NoFit:
        if not self.count:
            return Plan(self.group.key, ())
        fits = fits_somewhere(self.classes)
        if fits:
            for scope, domain in self._scopes():
                assignments = self._fill(scope)
                if len(assignments) == self.count:
                    return Plan(self.group.key, tuple(assignments), domain)
                if len(assignments) >= len(self.best):
                    self.best = assignments
        elif self.rule.required:
            self._outer()  # for the fallback alone (the roomiest domain)
        if not self.best and (self.reason is not None or not fits):  # what a starving head would hold
            self.best = (self._fill(self.fallback) if fits  # the counts bound these: never the whole group
                         else place(self.classes, self.pool, self.ledger, self.fallback, self.occupancy))
        if self.reason is not None and fits:  # else the cluster's shortage explains it
            return NoFit(self.group.key, self.reason(), ("topology",), len(self.best), self.count, tuple(self.best))
        short = no_fit(self.group, self.classes, self.best, self.pool, self.ledger, self.occupancy)
        return replace(short, reason=f"{self._rule_words()}: {short.reason}") if fits else short

    def _rule_words(self) -> str:
        rule = self.rule
        words = [f"{kind} {label}" for kind, label in (("required", rule.required), ("preferred", rule.preferred))
                 if label]
        if rule.slice_required:
            words.append(f"slices of {rule.slice_size or self.count} on {rule.slice_required}")
        return ", ".join(words)

    # --- which scopes, best first -----------------------------------------------------------

    def _scopes(self) -> Iterable[tuple[Scope, str | None]]:
        """Each scope once: with `preferred`, single domains of it that hold the group (BestFit,
        inside a domain of `required` when set), then per domain of `required` (or the whole
        cluster) as few domains of `preferred` as hold the group, then that whole domain."""
        outer = self._outer()
        if outer is None:
            return
        seen: set[Scope] = set()
        spread = any(cls.members[0].rules and cls.members[0].rules.spread for cls in self.classes)
        preferred = None if spread else self.rule.preferred  # asked to be spread: no domain is preferred
        tried: list[tuple[Scope, str | None]] = []
        if preferred:
            rooms, domains = self._rooms(preferred), self.pool.domains(preferred)
            for room in best_fit(rooms.values(), self.need)[:self.tries]:
                nodes = domains[room.value]
                inside = next((nodes if scope is None else nodes & scope
                               for scope, _ in outer if scope is None or not nodes.isdisjoint(scope)), None)
                if inside:
                    tried.append((inside, f"{preferred}={room.value}"))
        for scope, domain in outer:
            if preferred:
                domains = self.pool.domains(preferred)
                few = fewest(self._rooms(preferred, scope).values(), self.need)
                if few and len(few) > 1:
                    union = frozenset().union(*(domains[room.value] for room in few))
                    tried.append((union if scope is None else union & scope, domain))
            tried.append((scope, domain))
        for scope, domain in tried:
            if scope not in seen:
                seen.add(scope)
                yield scope, domain

    def _outer(self) -> list[tuple[Scope, str | None]] | None:
        """The domains of `required` that hold the group, best first (or the whole cluster
        without one); None, with the reason, when none does."""
        label = self.rule.required
        if not label:
            return [(None, None)]
        rooms = self._rooms(label)
        anchor = self._anchor_of(self.group.members, label)
        if anchor is not None:  # members reserved before a restart: the rest go where they are
            rooms = {anchor: rooms.get(anchor) or DomainRoom(anchor, [0] * len(self.packed))}
        domains = self.pool.domains(label)
        if rooms:
            roomiest = max(rooms.values(), key=lambda r: (r.room[:1], r.free, r.value))
            self.fallback = domains.get(roomiest.value, frozenset())
        else:
            self.fallback = frozenset()
        fitting = best_fit(rooms.values(), self.need)
        if not fitting:
            self.reason = lambda: self._shortage("required", label, rooms)
            return None
        return [(domains.get(room.value, frozenset()), f"{label}={room.value}") for room in fitting[:self.tries]]

    def _rooms(self, label: str, scope: Scope = None) -> dict[str, DomainRoom]:
        """What each domain of the label offers the group before it is placed, counting the nodes
        of the scope alone: members counted from each class's nodes by free accelerators, as
        `_domains` counts them; free accelerators on the nodes with room for one of the hardest
        class (what BestFit leaves stranded: choosing a domain changes nothing on the others)."""
        rooms = self._rooms_of.get((label, scope))
        if rooms is not None:
            return rooms
        rooms = self._rooms_of[label, scope] = {}
        if not self.packed:  # nothing to count: every domain with nodes each class may use
            for value, nodes in self.pool.domains(label).items():
                nodes = nodes if scope is None else nodes & scope
                if all(not cls.eligible.isdisjoint(nodes) for cls in self.classes):
                    rooms[value] = DomainRoom(value, [])
            return rooms
        for index, (cls, accelerator) in enumerate(self.packed):
            for free, names in cls.room.items():
                counted = (self.pool.labelled(label, names, (accelerator, free)) if scope is None
                           else self.pool.labelled(label, scope.intersection(names)))
                for domain, count in counted.items():
                    if domain is not None:
                        room = rooms.get(domain) or rooms.setdefault(domain, DomainRoom(domain, [0] * len(self.packed)))
                        room.room[index] += free // cls.per_member * count
                        room.free += free * count if index == 0 else 0
        capacity = self.pool.capacity(label, self.packed[0][1])
        for value, room in rooms.items():
            room.capacity = capacity.get(value, 0)
        return rooms

    def _shortage(self, kind: str, label: str, rooms: Mapping[str, DomainRoom], need: Sequence[int] | None = None,
                  what: str = "", after: str = "", every: bool = True) -> str:
        """`domains.shortage` for the hardest class; `every` lists the label's domains without room too."""
        need = self.need if need is None else need
        if not self.packed:
            return f"{kind} {label}: no {noun(label)} has nodes every member{what} may run on"
        cls, accelerator = self.packed[0]
        units = sum(count * c.per_member for count, (c, a) in zip(need, self.packed) if a == accelerator)
        listed = {value: DomainRoom(value, room.room, room.free) for value, room in rooms.items()}
        for value in self.pool.domains(label) if every else ():
            listed.setdefault(value, DomainRoom(value, [0] * len(self.packed)))
        values = self.pool.label_values(label)  # free accelerators too few for one member are free too
        for free, names in self.ledger.nodes_by_free(accelerator).items():
            if 0 < free < cls.per_member:
                for domain, count in Counter(map(values.get, names & cls.eligible)).items():
                    if domain in listed:
                        listed[domain].free += free * count
        return shortage(kind, label, f"{units} {accelerator}{what}", listed.values(), need[0], units, after)

    # --- placing inside a scope ------------------------------------------------------------

    def _fill(self, scope: Scope) -> list[Assignment]:
        if not self.rule.slice_required:
            return place(self.classes, self.pool, self.ledger, scope, self.occupancy)
        return self._fill_slices(scope, self.rule.slice_required)

    def _fill_slices(self, scope: Scope, label: str) -> list[Assignment]:
        """Slice by slice in rank order, each in the BestFit domain of the slice `label` inside the
        scope that takes it (the domain of its members already reserved, if any), counting what
        the earlier slices took."""
        pool = self.pool
        domains = pool.domains(label)
        rooms = {value: DomainRoom(value, list(room.room), room.free, room.capacity)
                 for value, room in self._rooms(label, scope).items()}
        waiting = {member.uid for cls in self.classes for member in cls.members}
        runs = slices(self.group.members, self.rule.slice_size)
        taken: dict[str, Resources] = {}
        assignments: list[Assignment] = []
        try:
            for position, run in enumerate(runs):
                uids = {member.uid for member in run if member.uid in waiting}
                if not uids:
                    continue
                classes = [replace(cls, members=[m for m in cls.members if m.uid in uids]) for cls in self.classes]
                classes = [cls for cls in classes if cls.members]
                need = [sum(1 for m in cls.members if m.uid in uids) for cls, _ in self.packed]
                anchor = self._anchor_of(run, label)
                candidates = ([rooms.get(anchor) or DomainRoom(anchor, [0] * len(self.packed))] if anchor
                              else best_fit(rooms.values(), need)[:self.tries or SLICE_TRIES])
                placed = None
                for room in candidates:
                    nodes = domains.get(room.value, frozenset())
                    trial_taken = {node: dict(resources) for node, resources in taken.items()}
                    trial: list[Assignment] = []
                    place_into(classes, pool, self.ledger, nodes if scope is None else nodes & scope,
                               self.occupancy, trial_taken, trial, count_last=True)
                    if len(trial) == len(uids):
                        placed = trial
                        self._take_room(room, {node for _, node in trial}, taken, trial_taken)
                        taken = trial_taken
                        break
                    uncount(trial, self.occupancy)
                if placed is None:
                    if self.reason is None and not best_fit(rooms.values(), need):
                        after = f", {position} of {len(runs)} slices placed" if position else ""
                        what = f" for each slice of {self.rule.slice_size or self.count} members"
                        self.reason = partial(self._shortage, "slice-required", label, rooms, need, what, after,
                                              every=scope is None)
                    break
                assignments += placed
        finally:
            uncount(assignments, self.occupancy)
        return assignments

    def _anchor_of(self, run: Sequence[Member], label: str) -> str | None:
        """The domain of `label` holding most of the members of `run` already reserved or bound."""
        values = self.pool.label_values(label)
        held = Counter(values.get(node) for node in _booked_nodes(run))
        held.pop(None, None)
        return held.most_common(1)[0][0] if held else None

    def _take_room(self, room: DomainRoom, nodes: Iterable[str], before: Mapping[str, Resources],
                   after: Mapping[str, Resources]) -> None:
        """Count in the domain's room what a slice took on `nodes` (this plan's use `before` and `after` it)."""
        for name in nodes:
            free_on = self.ledger.free(name)
            for index, (cls, accelerator) in enumerate(self.packed):
                if name not in cls.eligible:
                    continue
                was, now = (max(0, floor(free_on.get(accelerator, 0) - taken.get(name, {}).get(accelerator, 0)))
                            for taken in (before, after))
                room.room[index] += now // cls.per_member - was // cls.per_member
                if index == 0:  # the free accelerators of nodes with room for a member, as `_rooms` counts them
                    room.free += (now if now >= cls.per_member else 0) - (was if was >= cls.per_member else 0)


def _booked_nodes(members: Iterable[Member]) -> list[str]:
    """The nodes of the live members already reserved or bound."""
    return [node for member in members
            if not member.waiting and not member.terminal and (node := member.reserved_node or member.node)]
