"""A tree of groups planned as one (issue 25; `cache.trees` says what a tree is): a parent Gang's
children, each a group or a parent in turn, of which `min_group_count` must all be placeable
together, each at its own minimum, inside one domain of the parent's own topology rule.

`plan_tree` chooses the parent's domain first: with `required`, the domains of its label that hold
the accelerators of the `min_group_count` smallest children still to place, BestFit as a group's
own rule chooses (`planning.domains`: partly used first, then the fewest accelerators free; at
most `PARENT_TRIES`), or the domain its children already hold (reserved before a restart, or
admitted); with `preferred` alone, those domains and then the whole cluster; with no rule, the
whole cluster (or the grandparent's domain). Inside it, every child still to place is planned in
turn, by its own rule, with `planner.plan_group` confined to the domain's nodes (`within`), on one
working ledger that counts what the children before it took; a child that does not fit is passed
over. The tree is admitted only when at least `min_group_count` of its children hold their
minimum (those admitted before count): then every child that fitted is in the plan, so children
beyond `min_group_count` come along when there is room, and later, each whole at its own minimum,
inside the tree's domain, when there is not. Otherwise the next domain is tried, and when none
holds the tree nothing of it is placed (`NoFit`, saying how many children fitted where they came
closest and why the first that did not fit did not).

`plan_unit` plans what the queue holds, a group or a tree. Pure: the ledger and occupancy given are
left as they were.
"""

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from math import ceil

from gangkeeper.controller.cache.capacity import Ledger
from gangkeeper.controller.cache.occupancy import Occupancy
from gangkeeper.controller.checks.eligibility import NodePool
from gangkeeper.controller.model.members import NO_TOPOLOGY, Group, GroupKey, Member, TopologyRule
from gangkeeper.controller.planning.domains import DomainRoom, best_fit, shortage
from gangkeeper.controller.planning.planner import apply, plan_group
from gangkeeper.controller.planning.plans import Assignment, NoFit, Plan, Scope, Topology

PARENT_TRIES = 8  # domains of a parent's rule a tree is tried in, at most, in BestFit order
TREE_KEY_PREFIX = "tree:"  # a tree's key: (namespace, "tree:<parent>"), no group label's (labels have no ':')


def tree_key(namespace: str, parent: str) -> GroupKey:
    return namespace, f"{TREE_KEY_PREFIX}{parent}"


@dataclass(frozen=True, slots=True)
class Tree:
    """A parent Gang (`name`) with its children as the queue takes them: groups (each as the queue
    admits it, its min count) and parents in turn. `topology` is the parent's own rule (required
    and preferred: the domain it confines its children to). Queued by its most important child's
    priority and its oldest child's age."""

    key: GroupKey
    name: str
    min_group_count: int
    children: tuple["Group | Tree", ...]
    topology: TopologyRule = NO_TOPOLOGY
    preempts: bool = True

    @property
    def priority(self) -> int:
        return max((child.priority for child in self.children), default=0)

    @property
    def first_seen(self) -> float:
        return min((child.first_seen for child in self.children), default=0.0)

    @property
    def members(self) -> tuple[Member, ...]:
        return tuple(member for child in self.children for member in child.members)

    @property
    def waiting_members(self) -> tuple[Member, ...]:
        return tuple(member for child in self.children for member in child.waiting_members)

    @property
    def complete(self) -> bool:
        """At least `min_group_count` children admitted or complete (all their members present and gated)."""
        return sum(1 for child in self.children if held(child) or child.complete) >= self.min_group_count

    def missing(self) -> str:
        """What keeps the tree out of the queue: the children not complete, and how short each is."""
        short = [child for child in self.children if not held(child) and not child.complete]
        ready = len(self.children) - len(short)
        said = ", ".join(f"{_name(child)} ({_shortfall(child)})" for child in short[:5])
        return (f"{ready} of min group count {self.min_group_count} children complete"
                + (f"; waiting for {said}" if said else ""))

    def __str__(self) -> str:
        return f"{self.key[0]}/{self.name}"


Unit = Group | Tree  # what the queue plans as one


def held(unit: Unit) -> bool:
    """Whether a child is admitted: a group with its min count placed (reserved, bound or
    succeeded), a tree with `min_group_count` children held."""
    if isinstance(unit, Tree):
        return sum(1 for child in unit.children if held(child)) >= unit.min_group_count
    placed = sum(1 for m in unit.members if m.phase == "Succeeded" or (not m.terminal and (m.node or m.reserved_node)))
    return unit.min_count > 0 and placed >= unit.min_count


def plan_unit(unit: Unit, pool: NodePool, ledger: Ledger, topology: Topology = Topology(),
              occupancy: Occupancy | None = None, within: Scope = None) -> Plan | NoFit:
    if isinstance(unit, Tree):
        return plan_tree(unit, pool, ledger, topology, occupancy, within)
    return plan_group(unit, pool, ledger, topology, occupancy, within)


def plan_tree(tree: Tree, pool: NodePool, ledger: Ledger, topology: Topology = Topology(),
              occupancy: Occupancy | None = None, within: Scope = None) -> Plan | NoFit:
    """Every child that fits inside one domain of the parent's rule, when at least `min_group_count`
    do (module docstring); else why not."""
    admitted = sum(1 for child in tree.children if held(child))
    needed = max(0, tree.min_group_count - admitted)
    todo = sorted((child for child in tree.children if not held(child) and child.complete and child.waiting_members),
                  key=lambda child: (-child.priority, child.first_seen, child.key))
    if not todo:
        return NoFit(tree.key, tree.missing(), ("children",), 0, len(tree.waiting_members))
    scopes, why = _parent_scopes(tree, todo, needed, pool, ledger, within)
    best: tuple[int, list[Assignment], list[tuple[Unit, NoFit]], str | None] = (-1, [], [], None)
    for scope, domain in scopes:
        working, around = ledger.copy(), occupancy.copy() if occupancy is not None else None
        fitted, assignments, refused = 0, list[Assignment](), list[tuple[Unit, NoFit]]()
        for position, child in enumerate(todo):
            if fitted + len(todo) - position < needed:
                break  # too few left to admit the tree
            outcome = plan_unit(child, pool, working, topology, around, scope)
            if isinstance(outcome, Plan):
                apply(outcome, working, around, pool)
                assignments += outcome.assignments
                fitted += 1
            else:
                refused.append((child, outcome))
        if fitted >= max(needed, 1):
            return Plan(tree.key, tuple(assignments), domain)
        if fitted > best[0]:
            best = (fitted, assignments, refused, domain)
    fitted, assignments, refused, domain = best
    placed = max(fitted, 0)
    if why is None:
        where = f" in {domain}" if domain else ""
        first = refused[0] if refused else None
        because = f"; {_name(first[0])}: {first[1].reason}" if first is not None else ""
        why = (f"tree {tree.name}: {placed} of min group count {max(needed, 1)} children fit together{where}"
               f"{because}")
    limiting = refused[0][1].limiting if refused else ("topology",)
    return NoFit(tree.key, why, limiting, len(assignments), len(tree.waiting_members), tuple(assignments))


def _parent_scopes(tree: Tree, todo: Sequence[Unit], needed: int, pool: NodePool, ledger: Ledger,
                   within: Scope) -> tuple[list[tuple[Scope, str | None]], str | None]:
    """The scopes the children are tried in, best first, and why none is when there is none."""
    rule = tree.topology
    label = rule.required or rule.preferred
    if label is None:
        return [(within, None)], None
    domains = {value: nodes if within is None else nodes & within for value, nodes in pool.domains(label).items()}
    domains = {value: nodes for value, nodes in domains.items() if nodes}
    held_domain = anchor(tree.members, pool.label_values(label))
    if held_domain is not None and rule.required:
        return [(domains.get(held_domain, frozenset()), f"{label}={held_domain}")], None
    accelerator = _accelerator(todo, ledger)
    demands = sorted(_demand(child, accelerator) for child in todo)
    need = sum(demands[:max(needed, 1)])
    rooms = [_room(value, nodes, accelerator, pool, ledger) for value, nodes in domains.items()]
    fitting = best_fit(rooms, [need])[:PARENT_TRIES]
    scopes: list[tuple[Scope, str | None]] = [(domains[room.value], f"{label}={room.value}") for room in fitting]
    if rule.required:
        if not scopes:
            units = (f"{need} {accelerator}" if accelerator else "nodes") + f" for {max(needed, 1)} of its children"
            return [], f"tree {tree.name}: " + shortage("required", label, units, rooms, need, need)
        return scopes, None
    return [*scopes, (within, None)], None


def _accelerator(todo: Iterable[Unit], ledger: Ledger) -> str | None:
    """The accelerator the children ask for most, which domains are weighed by."""
    asked: Counter = Counter()
    for child in todo:
        for member in child.waiting_members:
            for name, value in member.requests.items():
                if ledger.is_accelerator(name):
                    asked[name] += ceil(value)
    return asked.most_common(1)[0][0] if asked else None


def _demand(child: Unit, accelerator: str | None) -> int:
    if accelerator is None:
        return 0
    return sum(ceil(member.requests.get(accelerator, 0)) for member in child.waiting_members)


def _room(value: str, nodes: frozenset[str], accelerator: str | None, pool: NodePool, ledger: Ledger) -> DomainRoom:
    """A domain's free accelerators (room counted in accelerators), of the capacity its nodes have."""
    if accelerator is None:
        return DomainRoom(value, [0])
    free = sum(int(ledger.free(name).get(accelerator, 0)) for name in nodes)
    capacity = sum(int(pool.nodes[name].allocatable.get(accelerator, 0)) for name in nodes)
    return DomainRoom(value, [free], free, capacity)


def anchor(members: Iterable[Member], values: Mapping[str, str]) -> str | None:
    """The domain holding most of the tree's members already reserved or bound."""
    held_there = Counter(values.get(node) for member in members
                         if not member.waiting and not member.terminal and (node := member.reserved_node or member.node))
    held_there.pop(None, None)
    return held_there.most_common(1)[0][0] if held_there else None


def _name(unit: Unit) -> str:
    return unit.name if isinstance(unit, Tree) else unit.key[1]


def _shortfall(unit: Unit) -> str:
    if isinstance(unit, Tree):
        return unit.missing()
    present = sum(1 for member in unit.members if not member.terminal)
    return f"{present}/{unit.min_count} pods"
