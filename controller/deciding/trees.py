"""A pass's part for trees of groups (`cache.trees`: what a tree is; `planning.trees`: how one is
planned): the tree each child group belongs to, as the queue takes it; a child released only once
its tree is admitted; a tree rolled back as one; and the parent Gang's status.

  - **Queued as one.** The children the pass would queue are queued as their tree (`units`), with
    every other child of the tree as it stands (admitted children count towards its
    `min_group_count`, and hold the domain the rest go to). A child's Gang with no pods yet is a
    child with none of its members present.
  - **Released together.** The children are reserved in one pass (one write on each child's Gang);
    a child whose tree does not yet hold `min_group_count` children at their minimum (a write that
    failed) stays reserved and gated, `WaitingForTree`, and its tree is planned again with it. It
    holds its nodes so for the bind timeout at most (`waited_too_long`): then it is rolled back,
    and its tree with it, rather than keep capacity for a tree that may not fit again (two trees
    each holding part of what the other needs would wait for ever).
  - **Rolled back as one.** When a child is rolled back (its release not bound in time, or below its
    minimum for too long), every other child of the tree that holds capacity is rolled back with
    it, the same way (`rollback.roll_back`), and released no more in this pass.
  - **Confined.** A child's members placed after admission (elastic extras, replacements) go only
    into the domains its parents' required rules hold (`confinement`).
  - **Parents made.** A workload asking to be a tree of its groups (a JobSet's replicated jobs, a
    LeaderWorkerSet's replica groups: `gangkeeper.io/tree`) gets its parent Gang made, ours and
    owned by it (`make_parents`); until it exists, its children wait, planned neither alone nor
    as a tree.
  - **Status.** The parent Gang's status says per child what is present and placed
    (`status.children`: name, present, minCount, placed), and in the columns of `kubectl get gangs`
    children rather than members: `present` the children complete, `minCount` its
    `min_group_count`, `placed` the children admitted. Phase: `Waiting` until the tree is
    admitted, `Admitted`, then `Running` once its admitted children all run. A tree that breaks a
    rule says so (`InvalidTree`, as each of its children does).
"""

from collections.abc import Callable, Iterable, Mapping, Sequence

from gangkeeper import integrations, names
from gangkeeper.controller.cache import trees
from gangkeeper.controller.cache.groups import GangView
from gangkeeper.controller.checks.eligibility import NodePool
from gangkeeper.controller.deciding import gangs
from gangkeeper.controller.deciding.booking import reserve
from gangkeeper.controller.deciding.decisions import Phase, Reason, Release, SaveGang, Verdict
from gangkeeper.controller.deciding.preempting import preempt
from gangkeeper.controller.deciding.reporting import gang_place
from gangkeeper.controller.deciding.rollback import owner_of, roll_back
from gangkeeper.controller.deciding.state import PassState, rfc3339
from gangkeeper.controller.model.members import NO_TOPOLOGY, Group, GroupKey, TopologyRule
from gangkeeper.controller.model.objects import Workload
from gangkeeper.controller.planning.plans import Assignment, Plan, Scope
from gangkeeper.controller.planning.preemption import Preemption
from gangkeeper.controller.planning.queue import admission_view
from gangkeeper.controller.planning.trees import Tree, Unit, anchor, held, tree_key


def root_of(state: PassState, view: GangView) -> Workload | None:
    """The root parent Gang of the tree the group is a child in; None for a group in no tree."""
    if not view.parent:
        return None
    gang = state.workloads.gang(view.group.key[0], view.parent)
    return trees.root_of(gang, state.workloads) if gang is not None else None


def tree_of(state: PassState, root: Workload) -> Tree:
    """The tree under `root` as it stands, each child group whole (found once a pass)."""
    key = tree_key(root.namespace, root.name)
    found = state.trees.get(key)
    if found is None:
        found = state.trees[key] = _unit(state, root, lambda group: group, {root.name})
    return found


def units(state: PassState, views: Sequence[GangView]) -> tuple[list[Unit], dict[GroupKey, GangView]]:
    """What the queue plans of `views` (the groups waiting for admission): each group in no tree
    as the queue admits it, each tree once, its children as the queue admits them; and by key the
    view of every group they hold."""
    planned: list[Unit] = []
    by_key: dict[GroupKey, GangView] = {}
    roots: dict[str, Workload] = {}
    for view in views:
        root = root_of(state, view)
        if root is not None:
            roots.setdefault(root.name, root)
        elif view.parent:  # its Gang names a parent not made yet (by gangkeeper, for a JobSet, or by you)
            state.verdicts[view.group.key] = Verdict(Phase.WAITING, Reason.QUEUED,
                                                     f"waiting for its parent Gang {view.parent}")
        else:
            planned.append(admission_view(view.group))
            by_key[view.group.key] = view
    for root in roots.values():
        planned.append(_unit(state, root, admission_view, {root.name}))
        by_key.update({view.group.key: view for view in _child_views(state, root)})
    return planned, by_key


def released_together(state: PassState, view: GangView) -> bool:
    """Whether a child may be released: its tree holds `min_group_count` children at their minimum."""
    if not view.parent:
        return True
    root = root_of(state, view)
    return root is not None and held(tree_of(state, root))


def waited_too_long(state: PassState, view: GangView) -> str | None:
    """Why a child reserved while its tree is not must give its nodes back, once it has waited for
    the rest of its tree for the bind timeout (module docstring); None while it may wait on."""
    key = view.group.key
    since = min(state.memory.waiting_for_tree.get(key, state.now), state.now)
    timeout = state.settings.bind_timeout_seconds
    if state.now - since < timeout:
        state.remembered.waiting_for_tree[key] = since
        state.figures.due.append(since + timeout)
        return None
    root = root_of(state, view)
    tree = f"tree {root.name}" if root is not None else f"parent {view.parent}"
    return f"reserved for {timeout:g}s while {tree} could not place the rest of its children"


def preempt_tree(state: PassState, tree: Tree, preemption: Preemption, views: Mapping[GroupKey, GangView],
                 view_of: Callable[[GroupKey], GangView | None]) -> None:
    """A tree taking lower-priority work's place: each child's part of the plan booked on it; the
    first child with a part takes the victims (`preempting.preempt`), and every other child waits
    for the same room to come free, so that none is released before the victims are gone."""
    by_child = parts(tree, preemption.plan)
    taking: GroupKey | None = None
    for group in groups_of(tree):
        view, part = views.get(group.key), by_child.get(group.key)
        if view is None or not part:
            continue
        plan = Plan(group.key, tuple(part), preemption.plan.domain)
        if taking is None:
            taking = group.key
            preempt(state, view, Preemption(plan, preemption.victims), view_of)
            continue
        reserve(state, view, plan)
        state.remembered.preempting[group.key] = state.remembered.preempting[taking]
        state.verdicts[group.key] = Verdict(Phase.ADMITTED, Reason.PREEMPTING,
                                            f"{len(part)} members reserved with tree {tree.name}, "
                                            f"which preempts {len(preemption.victims)} of lower priority")


def parts(tree: Tree, plan: Plan) -> dict[GroupKey, list[Assignment]]:
    """The tree's plan by child group."""
    by_child = {member.uid: group.key for group in groups_of(tree) for member in group.members}
    found: dict[GroupKey, list[Assignment]] = {}
    for member, node in plan.assignments:
        found.setdefault(by_child[member.uid], []).append((member, node))
    return found


def confinement(state: PassState, view: GangView, pool: NodePool) -> Scope:
    """The nodes a child's members placed after its tree's admission (elastic extras, replacements)
    may use: the domains its parents' required rules hold (None: anywhere)."""
    scope: Scope = None
    gang = state.workloads.gang(view.group.key[0], view.parent) if view.parent else None
    seen: set[str] = set()
    while gang is not None and gang.name not in seen:
        seen.add(gang.name)
        label = _rule(gang).required
        held_there = anchor(tree_of(state, gang).members, pool.label_values(label)) if label else None
        if label and held_there is not None:
            nodes = pool.domains(label).get(held_there, frozenset())
            scope = nodes if scope is None else scope & nodes
        gang = trees.parent_of(gang, state.workloads)
    return scope


def groups_of(tree: Tree) -> Iterable[Group]:
    for child in tree.children:
        if isinstance(child, Tree):
            yield from groups_of(child)
        else:
            yield child


def roll_back_together(state: PassState, views: Sequence[GangView]) -> None:
    """Every child holding capacity in the tree of a child rolled back this pass, rolled back too
    (its releases of this pass dropped)."""
    for view in views:
        if view.group.key not in state.figures.rolled_back or not view.parent:
            continue
        root = root_of(state, view)
        if root is None:
            continue
        for sibling in _child_views(state, root):
            key = sibling.group.key
            if key in state.figures.rolled_back or not any(
                    not m.terminal and (m.node or m.reserved_node) for m in sibling.group.members):
                continue
            state.actions[:] = [a for a in state.actions if not (isinstance(a, Release) and a.group == key)]
            attempts = state.remembered.rollbacks.get(key, (0, 0.0))[0]
            roll_back(state, sibling, owner_of(state, sibling), attempts,
                      f"rolled back with tree {root.name}: {view.group.key[1]} was ({state.verdicts[view.group.key].message})")


def make_parents(state: PassState, views: Iterable[GangView]) -> None:
    """The parent Gang a workload asks to be made for the tree of its groups (a JobSet or a
    LeaderWorkerSet annotated `gangkeeper.io/tree`), when it does not exist: ours, owned by the workload, with the workload's
    min group count and topology."""
    made: set[tuple[str, str]] = set()
    for view in views:
        namespace = view.group.key[0]
        if not view.parent or (namespace, view.parent) in made or state.workloads.gang(namespace, view.parent):
            continue
        owner = _owner_workload(state, view)
        if owner is None or owner.min_group_count is None or owner.parent != view.parent:
            continue
        low, high = names.MIN_GROUP_COUNT_RANGE
        if not low <= owner.min_group_count <= high:
            state.verdicts[view.group.key] = Verdict(
                Phase.WAITING, trees.INVALID_TREE,
                f"{owner.kind} {owner.name}: metadata.annotations[{names.MIN_GROUP_COUNT_ANNOTATION}] is not accepted: "
                f"write a whole number from {low} to {high}, at most its number of children")
            continue
        made.add((namespace, view.parent))
        spec: dict = {"minGroupCount": owner.min_group_count}
        if owner.topology:
            spec["topology"] = dict(owner.topology)
        body = {"apiVersion": gangs.API_VERSION, "kind": names.GANG_KIND,
                "metadata": {"name": view.parent, "namespace": namespace,
                             "labels": {names.MANAGED_BY_LABEL: names.MANAGED_BY_VALUE},
                             "ownerReferences": [{"apiVersion": owner.api_version, "kind": owner.kind,
                                                  "name": owner.name, "uid": owner.uid}]},
                "spec": spec}
        state.actions.append(SaveGang(tree_key(namespace, view.parent), view.parent,
                                      {"phase": Phase.WAITING.value, "reason": str(Reason.INCOMPLETE)}, body))


def _owner_workload(state: PassState, view: GangView) -> Workload | None:
    integration = integrations.BY_SOURCE.get(view.source)
    if view.owner is None or integration is None or integration.resource is None:
        return None
    found = state.workloads.get((integration.resource.name, view.group.key[0], view.owner.name))
    return found if found is not None and found.uid == view.owner.uid else None


def decided_trees(state: PassState, views: Iterable[GangView]) -> list[Workload]:
    """The root Gangs of the trees the pass decided a child of, by name."""
    roots = {root.name: root for view in views if (root := root_of(state, view)) is not None}
    return [roots[name] for name in sorted(roots)]


def save_parent_status(state: PassState, root: Workload) -> None:
    """The status of the tree's parent Gangs (the root and those below it), when it changed."""
    problem = trees.tree_problem(root, state.workloads)
    tree = tree_of(state, root)
    parents = [(root, tree), *((gang, _unit(state, gang, lambda group: group, {gang.name}))
                               for gang in trees.descendants(root, state.workloads) if gang.is_parent)]
    for gang, unit in parents:
        status = _parent_status(state, unit, gang, problem)
        key = unit.key
        due = gangs.status_due(gang.status or {}, status, state.memory.status_written.get(key), state.now)
        if due is None or due > state.now:
            state.figures.due += [due] if due is not None else []
            continue
        state.remembered.status_written[key] = state.now
        state.actions.append(SaveGang(key, gang.name, status))


def _parent_status(state: PassState, tree: Tree, gang: Workload, problem: str | None) -> dict:
    rows = []
    for child_gang, child in zip(trees.children(gang, state.workloads), tree.children):  # `_unit`'s order
        if isinstance(child, Tree):
            rows.append({"name": child.name, "present": _present(child), "minCount": child.min_group_count,
                         "placed": sum(1 for below in child.children if held(below))})
        else:
            rows.append({"name": child_gang.name,
                         "present": sum(1 for m in child.members if not m.terminal), "minCount": child.min_count,
                         "placed": sum(1 for m in child.members if not m.terminal and (m.node or m.reserved_node))})
    admitted = sum(1 for child in tree.children if held(child))
    if problem is not None:
        verdict = Verdict(Phase.WAITING, trees.INVALID_TREE, problem)
    elif held(tree):
        running = all(_running(child) for child in tree.children if held(child))
        verdict = Verdict(Phase.RUNNING if running else Phase.ADMITTED, Reason.BOUND if running else Reason.RESERVED,
                          f"{admitted} of {len(tree.children)} children admitted, min group count {tree.min_group_count}")
    else:
        first = _first_waiting(tree)
        waiting = state.verdicts.get(first) if first is not None else None
        verdict = Verdict(Phase.WAITING, waiting.reason if waiting is not None else Reason.INCOMPLETE,
                          waiting.message if waiting is not None else tree.missing())
    before = {c.get("type"): c for c in (gang.status or {}).get("conditions") or ()}
    admitted_now = "False" if verdict.phase is Phase.WAITING else "True"
    previous = before.get("Admitted") or {}
    since = previous.get("lastTransitionTime") if previous.get("status") == admitted_now else None
    return {"phase": verdict.phase.value, "reason": str(verdict.reason),
            "waitingSince": rfc3339(tree.first_seen) if verdict.phase is Phase.WAITING else None,
            "present": _present(tree), "minCount": tree.min_group_count, "placed": admitted,
            "children": rows,
            "conditions": [{"type": "Admitted", "status": admitted_now, "reason": str(verdict.reason),
                            "message": verdict.message[:32768],
                            "lastTransitionTime": since or rfc3339(state.now)}]}


def _present(tree: Tree) -> int:
    return sum(1 for child in tree.children if held(child) or child.complete)


def _running(unit: Unit) -> bool:
    if isinstance(unit, Tree):
        return all(_running(child) for child in unit.children if held(child))
    live = [m for m in unit.members if not m.terminal]
    return bool(live) and all(m.node for m in live)


def _first_waiting(tree: Tree) -> GroupKey | None:
    return next((group.key for group in groups_of(tree) if not held(group)), None)


def _child_views(state: PassState, root: Workload) -> list[GangView]:
    """The views of every group in the tree under `root`."""
    return [view for gang in trees.descendants(root, state.workloads)
            if not gang.is_parent and (view := _view_of(state, gang)) is not None]


def _view_of(state: PassState, gang: Workload) -> GangView | None:
    """The group whose Gang this is: of the groups of its `spec.groupName` (a JobSet's parts share
    theirs), the one it is the Gang of."""
    for view in state.index.views_in(gang.namespace, gang.group_name):
        place = gang_place(state, view)
        if place is not None and place.name == gang.name:
            return view
    return None


def _unit(state: PassState, parent: Workload, admitted_as: Callable[[Group], Group], seen: set[str]) -> Tree:
    """The tree under `parent`: each child Gang a subtree (a parent) or its group (`admitted_as`
    shapes it: whole, or as the queue admits it); a group with no pods yet has none present."""
    children: list[Unit] = []
    for gang in trees.children(parent, state.workloads):
        if gang.name in seen:
            continue
        if gang.is_parent:
            children.append(_unit(state, gang, admitted_as, seen | {gang.name}))
            continue
        view = _view_of(state, gang)
        if view is None or view.problem is not None:
            children.append(Group((gang.namespace, gang.group_name), (), max(gang.sizes.get("", 0), 1), 0, state.now))
        else:
            children.append(admitted_as(view.group))
    return Tree(tree_key(parent.namespace, parent.name), parent.name, parent.min_group_count or 0, tuple(children),
                _rule(parent), preempts=all(child.preempts for child in children))


def _rule(parent: Workload) -> TopologyRule:
    """The parent's own rule: the domain it confines its children to (required, preferred)."""
    required, preferred = parent.topology.get("required"), parent.topology.get("preferred")
    if not isinstance(required, str) and not isinstance(preferred, str):
        return NO_TOPOLOGY
    return TopologyRule(required if isinstance(required, str) else None,
                        preferred if isinstance(preferred, str) else None)
