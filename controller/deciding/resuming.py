"""The owners this controller suspended to roll their groups back, resumed when their backoff
is over, whoever leads by then: the time is on the owner (`gangkeeper.io/resume-at`)."""

from dataclasses import replace

from gangkeeper import integrations
from gangkeeper.controller.cache.index import Pending
from gangkeeper.controller.deciding.decisions import GangEvent, Reason, Report, ResumeOwner
from gangkeeper.controller.deciding.memory import HeldOwner
from gangkeeper.controller.deciding.reporting import about
from gangkeeper.controller.deciding.rollback import SuspendableOwner
from gangkeeper.controller.deciding.state import PassState, rfc3339
from gangkeeper.controller.model.objects import Workload, WorkloadKey
from gangkeeper.integrations.kind import SuspendState


def held_owners(state: PassState, pending: Pending) -> None:
    """The owners this controller suspended: resume those whose backoff is over; keep their groups'
    backoff count while their pods are gone; forget those gangkeeper no longer holds (module docstring).

    A pass that decides every group (a new leadership term) also finds the owners marked as held
    by gangkeeper on the owners themselves: what a predecessor suspended is resumed on time.
    """
    known = dict(state.memory.held)
    if pending.complete:
        for key, owner in state.workloads.items():
            if owner.suspend is not None and owner.suspend.held and key not in known:
                known[key] = HeldOwner(owner.uid, None, 0, owner.suspend.resource_version)
    decided = {view.group.key for view in pending.views}
    for key, entry in known.items():
        workload = state.workloads.get(key)
        if workload is None or workload.uid != entry.uid or workload.suspend is None:
            continue  # gone: forgotten
        switch = workload.suspend
        if switch.held:
            _resume_when_due(state, key, workload, switch, entry)
        elif switch.resource_version == entry.resource_version:
            state.remembered.held[key] = entry  # our suspension, still on its way
        elif entry.group is not None and entry.group not in decided:
            state.remembered.held[key] = entry  # left alone; its group's backoff count kept until its pods are back
            state.remembered.rollbacks[entry.group] = (entry.attempts, state.now)
        elif entry.group is not None:
            state.remembered.rollbacks[entry.group] = (entry.attempts, state.now)  # resumed: its group is planned again


def _resume_when_due(state: PassState, key: WorkloadKey, workload: Workload, switch: SuspendState,
                     entry: HeldOwner) -> None:
    """Resume a held owner once the time on it has come (at once when someone made it unreadable).
    The patch goes every pass until the cache shows it resumed (a duplicate fails its resourceVersion
    precondition, a lost one is sent again); it is reported once."""
    group = entry.group or (workload.namespace, workload.name)
    if entry.group is not None:
        state.remembered.rollbacks.setdefault(entry.group, (entry.attempts, switch.resume_at or state.now))
    due = switch.resume_at if switch.resume_at is not None else state.now
    if state.now < due:
        state.remembered.held[key] = entry
        state.figures.due.append(due)
        return
    resource, suspension = integrations.SUSPENSIONS[key[0]]
    state.actions.append(ResumeOwner(group, resource, workload.name, suspension.resuming(switch.resource_version)))
    state.remembered.held[key] = replace(entry, resumed=True)
    if not entry.resumed:
        state.actions.append(Report(group, GangEvent.RESUMED, Reason.RESUMED,
                                    f"gangkeeper resumed this {workload.kind}, which it had suspended to roll back "
                                    f"its group: its pods come back gated", about(workload)))


def suspended(owner: SuspendableOwner) -> str:
    _, workload, switch = owner
    if switch.held:
        until = f"until {rfc3339(switch.resume_at)}" if switch.resume_at is not None else "until the next pass"
        return (f"{workload.kind} {workload.name} is suspended by gangkeeper {until}: its pods go, and come back "
                f"gated when it is resumed")
    return (f"{workload.kind} {workload.name} is suspended, not by gangkeeper: nothing of the group is planned "
            f"until it is resumed")
