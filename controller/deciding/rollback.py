"""Taking a group back whole when its plan was wrong (a released member not bound within the bind
timeout, or Unschedulable; a group incomplete for too long), without harming it: its owner
suspended when its kind has a switch, else its members deleted for their owner to recreate them
gated (`reconciler`'s module docstring); and the groups a rollback gave up, every member deleted."""

import math
from typing import NamedTuple

from gangkeeper import integrations, names
from gangkeeper.controller.cache.groups import GangView
from gangkeeper.controller.cache.index import Pending
from gangkeeper.controller.deciding.decisions import DeletePod, GangEvent, Phase, Reason, Report, SuspendOwner, Verdict
from gangkeeper.controller.deciding.memory import HeldOwner
from gangkeeper.controller.deciding.reporting import about, report
from gangkeeper.controller.deciding.settings import Ownerless
from gangkeeper.controller.deciding.state import PassState, accelerators_held, named, rfc3339
from gangkeeper.controller.model.members import GroupKey
from gangkeeper.controller.model.objects import PodFacts, Workload, WorkloadKey
from gangkeeper.integrations.kind import SuspendState


class SuspendableOwner(NamedTuple):
    """A group's owner that has a suspend switch: its cache key, the object and the switch as read."""

    key: WorkloadKey
    workload: Workload
    switch: SuspendState


def roll_back(state: PassState, view: GangView, owner: SuspendableOwner | None, attempts: int, why: str) -> None:
    """Take the group back whole (module docstring): suspend its owner when it has a switch, else
    delete its members; then back off."""
    key = view.group.key
    delay = min(state.settings.rollback_backoff_cap_seconds, state.settings.rollback_backoff_seconds * 2 ** attempts)
    state.figures.rolled_back.add(key)
    live = [f for f in view.pods if not f.member.terminal]
    if owner is not None:
        until = math.ceil(state.now + delay)
        state.remembered.rollbacks[key] = (attempts + 1, until)
        message = suspend_owner(state, key, owner, attempts + 1, until, why, f"rolled back {attempts + 1}×")
        verdict = Verdict(Phase.WAITING, Reason.ROLLED_BACK, message)
    else:
        verdict = delete_members(state, view, live, delay, why)
        given_up = verdict.reason is Reason.MEMBERS_DELETED  # nothing comes back to wait for: no backoff
        state.remembered.rollbacks[key] = (attempts + 1, state.now if given_up else state.now + delay)
    state.verdicts[key] = verdict
    report(state, view, GangEvent.ROLLED_BACK, Reason.ROLLED_BACK, verdict.message, warning=True, force=True,
           pods=[f.member.name for f in live], on_pods=True)


def owner_of(state: PassState, view: GangView) -> SuspendableOwner | None:
    """The group's owner when its kind has a suspend switch and it is the owner the group names (uid);
    the owner's own owner when that one's switch is the one that sticks (a TrainJob's JobSet)."""
    integration = integrations.BY_SOURCE.get(view.source)
    if (view.owner is None or integration is None or integration.resource is None or integration.suspension is None
            or not integration.owns_pods):
        return None
    key = (integration.resource.name, view.group.key[0], view.owner.name)
    workload = state.workloads.get(key)
    if workload is not None and workload.uid == view.owner.uid and workload.switch is not None:
        resource, name, uid = workload.switch  # its own owner's switch is the one that sticks
        key = (resource, view.group.key[0], name)
        workload = state.workloads.get(key)
        if workload is None or workload.uid != uid:
            return None
    elif workload is None or workload.uid != view.owner.uid:
        return None
    return SuspendableOwner(key, workload, workload.suspend) if workload.suspend is not None else None


def suspend_owner(state: PassState, group: GroupKey, owner: SuspendableOwner, attempts: int, until: float,
                  why: str, cause: str) -> str:
    """Suspend the owner until `until`; `cause` says why in a few words (`rolled back 2×`, `preempted`)."""
    key, workload, switch = owner
    resource, suspension = integrations.SUSPENSIONS[key[0]]
    stamp = rfc3339(until)
    state.actions.append(SuspendOwner(group, resource, workload.name,
                                      suspension.suspending(switch.resource_version, stamp)))
    state.remembered.held[key] = HeldOwner(workload.uid, group, attempts, switch.resource_version)
    message = (f"{why}; suspended {workload.kind} {workload.name} until {stamp} ({cause}): its "
               f"operator deletes its pods without counting them as failed, and recreates them gated when "
               f"gangkeeper resumes it")
    state.actions.append(Report(group, GangEvent.SUSPENDED, Reason.SUSPENDED,
                                f"gangkeeper suspended this {workload.kind} until {stamp} ({cause}) to take its group "
                                f"{group[1]} back whole: {why}", about(workload), warning=True))
    return message


def delete_members(state: PassState, view: GangView, live: list[PodFacts], delay: float, why: str) -> Verdict:
    """Delete the members an owner recreates and, unless told to keep them, those none would."""
    key, label = view.group.key, view.label
    owned = [f.member for f in live if f.owner is not None and f.owner.kind != "Pod"]
    ownerless = [f.member for f in live if f.owner is None]
    delete = state.settings.rollback_ownerless is Ownerless.DELETE
    deleted = owned + (ownerless if delete else [])
    state.actions += [DeletePod(key, m.name, m.uid, why) for m in deleted]
    parts = [why]
    if owned:
        parts.append(f"deleted {len(owned)} members for their owner to recreate them gated")
    if ownerless:
        bound = [m for m in ownerless if m.node]
        held = accelerators_held(state, bound)
        listed = named(ownerless)
        if delete:
            parts.append(f"deleted {len(ownerless)} members no owner recreates ({len(bound)} bound, holding {held} "
                         f"accelerators): resubmit them (label {names.GROUP_LABEL}={label}): {listed}")
        else:
            parts.append(f"kept {len(ownerless)} members no owner recreates (--rollback-ownerless=keep): "
                         f"{len(bound)} bound, holding {held} accelerators the group cannot use until it is "
                         f"complete; delete them to free those: {listed}")
    if delete and ownerless and not owned:
        state.remembered.given_up[key] = frozenset(m.uid for m in deleted)
        return Verdict(Phase.FAILED, Reason.MEMBERS_DELETED, "; ".join(parts))
    parts.append(f"planning again in {delay:.0f}s")
    return Verdict(Phase.WAITING, Reason.ROLLED_BACK, "; ".join(parts))


def still_given_up(state: PassState, view: GangView) -> Verdict | None:
    """A group given up stays Failed while the pods the rollback deleted go; a new member (the
    group resubmitted) makes it a group like any other again."""
    deleted = state.memory.given_up.get(view.group.key)
    if deleted is None or not {m.uid for m in view.group.members if not m.terminal} <= deleted:
        return None
    state.remembered.given_up[view.group.key] = deleted
    return Verdict(Phase.FAILED, Reason.MEMBERS_DELETED, "every member was deleted (rolled back or preempted); "
                   f"resubmit them (label {names.GROUP_LABEL}={view.label})")


def remember_given_up(state: PassState, pending: Pending, gone: set[GroupKey]) -> None:
    """Given-up groups not decided this pass, and not gone, are still given up."""
    decided = {view.group.key for view in pending.views}
    for key, deleted in state.memory.given_up.items():
        if key not in decided and key not in gone:
            state.remembered.given_up.setdefault(key, deleted)
