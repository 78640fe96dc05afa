"""What a reconcile pass decides, as values: where each group stands, and the writes it asks for.

The pass (`controller.deciding.reconciler`) is pure and returns these; the executor (`controller.acting.executor`)
performs the writes. Decisions are enums and small frozen records, so that code decides on
them; the words a person reads (an Event's reason and message, a Gang condition's) travel
alongside for output only and are never tested.
"""

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from gangkeeper.controller.model.members import GroupKey
from gangkeeper.integrations.kind import Resource


class Phase(enum.StrEnum):
    """A group's phase, as its Gang's `status.phase` shows it (`kubectl get gangs`)."""

    WAITING = "Waiting"
    ADMITTED = "Admitted"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class Reason(enum.StrEnum):
    """Why a group stands where it does: the reason of its Gang's `Admitted` condition and of its Events."""

    INCOMPLETE = "Incomplete"
    QUEUED = "Queued"
    NO_FIT = "NoFit"
    BACKING_OFF = "BackingOff"
    RESERVED = "Reserved"
    RELEASED = "Released"
    BOUND = "Bound"
    FINISHED = "Finished"
    ROLLED_BACK = "RolledBack"
    TIMED_OUT = "TimedOut"
    SUSPENDED = "Suspended"  # its owner is suspended: its pods are going, nothing of it is planned
    RESUMED = "Resumed"      # gangkeeper resumed the owner it had suspended to roll the group back
    MEMBERS_DELETED = "MembersDeleted"  # a rollback deleted every member: nothing recreates them
    PREEMPTING = "Preempting"  # reserved where lower-priority work still runs: released once it is gone
    PREEMPTED = "Preempted"    # taken, whole, to make room for a group of higher priority
    # members beyond its min count (the last in its order) deleted to make room for a group of higher
    # priority: the group keeps running (`controller.planning.preemption`)
    EXTRAS_PREEMPTED = "ExtrasPreempted"
    # running with fewer members placed than it had, at or above its min count; and back to what it
    # had (`controller.deciding.elastic`)
    MEMBERS_LOST = "MembersLost"
    RECOVERED = "Recovered"
    # incomplete, its members gated, no new member for longer than `--incomplete-group-seconds`:
    # likely declared larger than what its owner creates before the group runs (`controller.deciding.incomplete`)
    INCOMPLETE_GROUP = "IncompleteGroup"
    # capacity asked of an autoscaler (`controller.deciding.provisioning`): waiting for its nodes; its
    # ask failed, expired or was revoked (asked again after a backoff); more than it may ever add
    PROVISIONING = "Provisioning"
    PROVISIONING_FAILED = "ProvisioningFailed"
    TOO_LARGE = "TooLargeToProvision"
    # a child of a tree of groups (`controller.deciding.trees`) reserved while its tree does not fit:
    # released once the tree's min group count of children are
    WITH_TREE = "WaitingForTree"


class GangEvent(enum.StrEnum):
    """The audit log's event for a group's news."""

    WAITING = "gang.waiting"
    RESERVED = "gang.reserved"
    RELEASED = "gang.released"
    BOUND = "gang.bound"
    ROLLED_BACK = "gang.rolled_back"
    TIMED_OUT = "gang.timed_out"
    SUSPENDED = "gang.suspended"
    RESUMED = "gang.resumed"
    MEMBER_DELETED = "gang.member_deleted"
    PREEMPTING = "gang.preempting"
    PREEMPTED = "gang.preempted"
    PROVISIONING = "gang.provisioning"  # capacity asked of an autoscaler (`controller.deciding.provisioning`)
    PROVISIONING_FAILED = "gang.provisioning_failed"
    STUCK = "gang.stuck"  # incomplete for too long, no new member arriving: reported once (`controller.deciding.incomplete`)
    DEGRADED = "gang.degraded"  # running with fewer members than it had: reported once (`controller.deciding.elastic`)
    RECOVERED = "gang.recovered"  # back to the members it had

    @property
    def decision(self) -> str:
        """The audit line's `decision`: what happened, without the `gang.` the event is filed under."""
        return self.value.removeprefix("gang.")


@dataclass(frozen=True, slots=True)
class Verdict:
    """Where a group stands after the pass, and why.

    `reason` is one of ours, or the word of the group's problem (`GangView.problem`, such as
    `Disagreement`), which `controller.cache.groups` coins and is shown as it is; the code tests only
    for our own (`verdict.reason is Reason.ROLLED_BACK`). `message` is for people.
    """

    phase: Phase
    reason: Reason | str
    message: str


# --- actions: the writes a pass asks for -------------------------------------------------

@dataclass(frozen=True)
class Reserve:
    """Book `node` for a gated member: its reservation annotation, if the pod is still as read."""

    group: GroupKey
    pod: str
    resource_version: str
    node: str


@dataclass(frozen=True)
class ReserveGroup:
    """Book the nodes of a plan for a group's gated members in one write: its Gang's
    `status.reservations` (pod name → uid and node, `controller.deciding.gangs.reservations_patch`), a
    merge patch that also removes the entries of pods gone, released or replaced (null). The Gang
    is created first (`create`, its body) when the pass found none."""

    group: GroupKey
    name: str
    reservations: Mapping[str, Mapping | None]
    create: Mapping | None = None


@dataclass(frozen=True)
class Release:
    """Pin a reserved member to its node and remove our gate, in one guarded JSON Patch
    (`controller.deciding.patches`). `label` (the members' group label) and `resource_version` (the pod's,
    as the pass read it) let the executor check, before any member of the group is released, that
    none changed since (`controller.acting.executor`)."""

    group: GroupKey
    pod: str
    node: str
    patch: tuple[Mapping, ...]
    label: str
    resource_version: str


@dataclass(frozen=True)
class DeletePod:
    """Delete a member of a group rolled back or preempted (this very pod: `uid`); `why`, when
    given, goes into an audit line naming the pod, so that every member deleted is on record."""

    group: GroupKey
    pod: str
    uid: str
    why: str = ""
    reason: Reason = Reason.ROLLED_BACK


@dataclass(frozen=True)
class EvictPod:
    """Evict a lone pod through the Eviction API, which honours its PodDisruptionBudgets and
    writes its `DisruptionTarget` condition; `group` is (namespace, pod name)."""

    group: GroupKey
    pod: str
    uid: str
    why: str


@dataclass(frozen=True)
class SuspendOwner:
    """Suspend the owner of a group rolled back, marked as gangkeeper's until it resumes it: one merge
    patch (`Suspension.suspending`) guarded by the resourceVersion the pass read."""

    group: GroupKey
    resource: Resource
    name: str
    patch: Mapping


@dataclass(frozen=True)
class ResumeOwner:
    """Resume an owner gangkeeper suspended, its backoff over, and remove gangkeeper's marks on it
    (`Suspension.resuming`), guarded the same way."""

    group: GroupKey
    resource: Resource
    name: str
    patch: Mapping


EVENT_MESSAGE_MAX = 1024  # the characters of a message an Event holds, as the executor writes it


class Involved(NamedTuple):
    """The object an Event is about, as its `involvedObject` names it: `kubectl describe` finds an
    object's Events by its uid (and name, namespace, kind). The uid is "" only for a Gang the
    same pass creates, which has none yet: the executor writes the Event once the Gang exists,
    with the uid the API gave it (`controller.acting.executor`)."""

    api_version: str
    kind: str
    name: str
    uid: str


@dataclass(frozen=True)
class Report:
    """One decision worth an audit line and an Event on `involved`, and with `on_pods` one on
    each of `pods` too (what `kubectl describe pod` shows)."""

    group: GroupKey
    event: GangEvent
    reason: Reason | str
    message: str
    involved: Involved
    pods: tuple[Involved, ...] = ()
    warning: bool = False
    on_pods: bool = False


@dataclass(frozen=True)
class TellPod:
    """An Event on one member (`kubectl describe pod`): why it waits, or that it was released with
    its group, in its own words (`controller.deciding.telling`). `reason` is the one its Gang shows
    for the same news; no audit line: the group's decision has its own."""

    group: GroupKey
    pod: Involved
    reason: Reason | str
    message: str
    warning: bool = False


@dataclass(frozen=True)
class DeleteGang:
    """Delete a Gang the controller created for a group without owner, now that the group is gone."""

    group: GroupKey
    name: str


@dataclass(frozen=True)
class SaveGang:
    """Create the Gang (`create` is its body) or just write its status."""

    group: GroupKey
    name: str
    status: Mapping
    create: Mapping | None = None


@dataclass(frozen=True)
class CreateObject:
    """Create an object asking an autoscaler for a group's capacity (a ProvisioningRequest, its
    PodTemplates, a placeholder pod: `controller.deciding.provisioning`); one that exists already is left as it is."""

    group: GroupKey
    resource: Resource
    body: Mapping


@dataclass(frozen=True)
class DeleteObject:
    """Delete one of those objects, this very one (`uid`); one gone already is no failure."""

    group: GroupKey
    resource: Resource
    name: str
    uid: str


Action = (Reserve | ReserveGroup | Release | DeletePod | EvictPod | SuspendOwner | ResumeOwner | Report | TellPod
          | SaveGang | DeleteGang | CreateObject | DeleteObject)
