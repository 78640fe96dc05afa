"""The two durable steps that book a group's nodes: its reservations (one write on its Gang, or
the reservation annotation on each member), then, once at least min count hold one, its release
(each reserved member pinned to its node and ungated, in one guarded JSON Patch). A group placed
on the capacity an autoscaler provisioned for it consumes that booking: its members are released
with the annotations that say so (`controller.deciding.provisioning`)."""

from gangkeeper import names
from gangkeeper.controller.cache.groups import GangView
from gangkeeper.controller.deciding import gangs
from gangkeeper.controller.deciding.decisions import GangEvent, Reason, Release, Reserve, ReserveGroup
from gangkeeper.controller.deciding.memory import Channel, News
from gangkeeper.controller.deciding.patches import release_patch
from gangkeeper.controller.deciding.reporting import gang_place, report
from gangkeeper.controller.deciding.state import PassState
from gangkeeper.controller.model.capacity import Answer, CapacityRequest
from gangkeeper.controller.model.objects import Workload
from gangkeeper.controller.planning.plans import Plan


def reserve(state: PassState, view: GangView, plan: Plan) -> None:
    """Book the plan: in one write on the group's Gang when it has one and the plan fits there,
    else on each member (its reservation annotation, guarded by the resourceVersion read)."""
    place = gang_place(state, view) if state.capabilities.keeps_gang_reservations else None
    patch = gangs.reservations_patch(view, plan.assignments, place.existing) if place is not None else None
    if place is not None and patch is not None:
        state.actions.append(ReserveGroup(view.group.key, place.name, patch,
                                          None if place.existing is not None else gangs.gang_body(view, place.name)))
    else:
        by_uid = {facts.member.uid: facts for facts in view.pods}
        for member, node in plan.assignments:
            state.actions.append(Reserve(view.group.key, member.name, by_uid[member.uid].resource_version, node))
    nodes = sorted(plan.nodes)
    report(state, view, GangEvent.RESERVED, Reason.RESERVED,
           f"reserved {len(plan.assignments)} members on {len(nodes)} nodes: {', '.join(nodes[:10])}",
           pods=[m.name for m, _ in plan.assignments], force=True)


def release(state: PassState, view: GangView) -> None:
    released = []
    booking = provisioned(state, view)
    consuming = {} if booking is None else {names.CONSUME_PROVISIONING_REQUEST_ANNOTATION: booking.name,
                                             names.PROVISIONING_CLASS_ANNOTATION: booking.provisioning_class}
    for facts in view.pods:
        member = facts.member
        if member.gated and member.reserved_node and not member.terminal and facts.gate_index is not None:
            state.actions.append(Release(view.group.key, member.name, member.reserved_node,
                                         release_patch(facts, member.reserved_node, state.now, consuming), view.label,
                                         facts.resource_version))
            released.append(member.name)
            state.released.setdefault(view.group.key, {})[member.uid] = member.reserved_node
    if released:
        key = view.group.key
        if state.memory.reported.get((key, Channel.STATE)) != News(Reason.RELEASED) and key in state.memory.complete_at:
            state.figures.released_after.append((key, state.now - state.memory.complete_at[key]))
        report(state, view, GangEvent.RELEASED, Reason.RELEASED,
               f"released {len(released)} members to their reserved nodes", pods=released)


def gang_of(state: PassState, view: GangView) -> Workload | None:
    """The group's Gang as it exists: what is asked for a group is owned by it (a Gang this pass
    creates has no uid yet: the group asks in the next pass)."""
    place = gang_place(state, view)
    return place.existing if place is not None and place.existing is not None and place.existing.uid else None


def provisioned(state: PassState, view: GangView) -> CapacityRequest | None:
    """The group's request the autoscaler provisioned and still books for it, if any."""
    gang = gang_of(state, view)
    if gang is None:
        return None
    return next((r for r in state.index.asked.requests(gang.uid)
                 if r.answer is Answer.PROVISIONED and not r.deleting), None)
