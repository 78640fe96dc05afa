"""Trees of groups (issue 25), as the cached Gangs make them: a Gang names its parent Gang in
`spec.parent` (same namespace), as native 1.37 PodGroups name their `parentCompositePodGroupName`;
a parent Gang has no members of its own and says in `spec.minGroupCount` how many of its children
must all be placeable together, each at its own minimum, before any member of the tree is released.

A tree is known by its root, the parent that names no parent. Its shape must be one the planner
can follow, else every group in it waits with the problem `InvalidTree`, which names the Gang, the
field, its value and what is accepted:
  - a `spec.parent` naming no Gang, or a Gang that is no parent (no `spec.minGroupCount`);
  - a cycle of parents;
  - a tree deeper than `names.TREE_DEPTH_MAX` levels (the root is one);
  - a parent whose `spec.minGroupCount` is more than the children naming it;
  - a child whose topology names a label coarser than its parent's required one, of the same
    family of labels (`names.TOPOLOGY_LEVELS`: a child asking for one zone under a parent that
    asks for one block). Labels of other families, or unknown ones, are not compared: the child is
    planned inside its parent's domain whatever it names.
Pure: reads the cached Gangs alone (`Gangs`: `cache.groups.Workloads`).
"""

from collections.abc import Iterator
from typing import Protocol

from gangkeeper import names
from gangkeeper.controller.model.objects import Workload

INVALID_TREE = "InvalidTree"
PARENT_HAS_NO_MEMBERS = "ParentHasNoMembers"
_CHILD_LABEL_FIELDS = ("required", "preferred", "sliceRequired")


class Gangs(Protocol):
    """The cached Gangs by name, and by the parent they name."""

    def gang(self, namespace: str, name: str) -> Workload | None: ...

    def children(self, namespace: str, parent: str) -> list[Workload]: ...


def parent_of(gang: Workload, workloads: Gangs) -> Workload | None:
    return workloads.gang(gang.namespace, gang.parent) if gang.parent else None


def root_of(gang: Workload, workloads: Gangs) -> Workload:
    """The top of the Gang's tree as far as its parents go (the Gang itself when it names none);
    a cycle stops where it closes."""
    seen = {gang.name}
    while (parent := parent_of(gang, workloads)) is not None and parent.name not in seen:
        seen.add(parent.name)
        gang = parent
    return gang


def children(parent: Workload, workloads: Gangs) -> list[Workload]:
    return workloads.children(parent.namespace, parent.name)


def descendants(parent: Workload, workloads: Gangs) -> Iterator[Workload]:
    """Every Gang below `parent`, parents before their children (a cycle is walked once)."""
    seen = {parent.name}
    pending = children(parent, workloads)
    while pending:
        gang = pending.pop(0)
        if gang.name not in seen:
            seen.add(gang.name)
            yield gang
            pending += children(gang, workloads)


def tree_groups(gang: Workload, workloads: Gangs) -> set[str]:
    """The groups (`spec.groupName`) of every Gang in the tree the Gang belongs to: a change to one
    Gang of a tree may change what every group in it may do."""
    root = root_of(gang, workloads)
    return {root.group_name, gang.group_name, *(below.group_name for below in descendants(root, workloads))}


def tree_problem(gang: Workload, workloads: Gangs) -> str | None:
    """What keeps the tree the Gang belongs to from being planned (module docstring), the first
    fault found going up from the Gang, then down from its root; None for a sound tree."""
    chain = [gang]
    while chain[-1].parent:
        child = chain[-1]
        parent = parent_of(child, workloads)
        where = f"Gang {child.name}: spec.parent: \"{child.parent}\""
        if parent is None:
            return (f"{where} names no Gang in namespace {child.namespace}: accepted: the name of a parent Gang "
                    f"(one with spec.minGroupCount) in the same namespace; create it, or remove spec.parent")
        if not parent.is_parent:
            return (f"{where} names Gang {parent.name}, which has no spec.minGroupCount: accepted: a parent Gang, "
                    f"one with spec.minGroupCount and no members of its own")
        if any(parent.name == seen.name for seen in chain):
            path = " → ".join([*(seen.name for seen in chain), parent.name])
            return f"{where} makes a cycle ({path}): accepted: a parent that is not one of its own descendants"
        chain.append(parent)
        if len(chain) > names.TREE_DEPTH_MAX:
            return (f"{where} makes a tree deeper than {names.TREE_DEPTH_MAX} levels "
                    f"({' → '.join(seen.name for seen in chain)}): accepted: at most {names.TREE_DEPTH_MAX} levels")
    return _shape_problem(chain[-1], workloads, len(chain))


def _shape_problem(parent: Workload, workloads: Gangs, depth_above: int) -> str | None:
    """The faults of the tree below `parent` (its depth from the root given): depth, counts, topology."""
    pending = [(parent, 1)]
    while pending:
        gang, depth = pending.pop(0)
        below = children(gang, workloads)
        if gang.is_parent:
            count, low = gang.min_group_count or 0, names.MIN_GROUP_COUNT_RANGE[0]
            if not low <= count <= max(len(below), low):
                return (f"Gang {gang.name}: spec.minGroupCount: {count} is not accepted: "
                        f"{_children_words(below)}: write a whole number from {low} to {max(len(below), low)}")
            if depth >= names.TREE_DEPTH_MAX and below:
                return (f"Gang {below[0].name}: spec.parent: \"{gang.name}\" makes a tree deeper than "
                        f"{names.TREE_DEPTH_MAX} levels: accepted: at most {names.TREE_DEPTH_MAX} levels")
        for child in below:
            problem = _topology_problem(child, gang)
            if problem:
                return problem
            pending.append((child, depth + 1))
    return None


def _children_words(below: list[Workload]) -> str:
    if not below:
        return "no Gang names it in spec.parent"
    shown = ", ".join(child.name for child in below[:10]) + (", …" if len(below) > 10 else "")
    return f"{len(below)} Gang{'s' * (len(below) != 1)} name{'s' * (len(below) == 1)} it in spec.parent ({shown})"


def _topology_problem(child: Workload, parent: Workload) -> str | None:
    """A child's label coarser than its parent's required one, of the same family."""
    required = parent.topology.get("required")
    if not isinstance(required, str):
        return None
    for field in _CHILD_LABEL_FIELDS:
        label = child.topology.get(field)
        if isinstance(label, str) and coarser(label, required):
            return (f"Gang {child.name}: spec.topology.{field}: \"{label}\" is coarser than its parent "
                    f"{parent.name}'s spec.topology.required \"{required}\": accepted: {required} or a finer label")
    return None


def coarser(label: str, than: str) -> bool:
    """Whether `label` names larger domains than `than`, by a family of `names.TOPOLOGY_LEVELS` holding both."""
    return any(label in levels and than in levels and levels.index(label) < levels.index(than)
               for levels in names.TOPOLOGY_LEVELS)
