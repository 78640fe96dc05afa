"""What gangkeeper asked an autoscaler for, as values: its ProvisioningRequests as the autoscaler
answered them, and which pods are placeholders (docs/design.md, "Autoscaled clusters")."""

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from gangkeeper import names
from gangkeeper.controller.model.members import Member
from gangkeeper.integrations.kind import Resource

# What the controller asks an autoscaler with (`controller.deciding.provisioning`).
PROVISIONING_REQUESTS = Resource(*names.PROVISIONING_REQUEST_API, names.PROVISIONING_REQUEST_KIND)
POD_TEMPLATES = Resource("", "v1", "podtemplates", "PodTemplate")
PLACEHOLDERS = Resource("", "v1", "pods", "Pod")


class Answer(enum.StrEnum):
    """Where a ProvisioningRequest stands, as the autoscaler's conditions say (the first that holds, in this order)."""

    FAILED = "Failed"                    # it will not provision it
    CAPACITY_REVOKED = "CapacityRevoked"  # it provisioned it, then took the capacity back
    CONSUMED = "Consumed"                # BookingExpired because its consumers took it: no failure
    BOOKING_EXPIRED = "BookingExpired"   # provisioned, not consumed in time: no longer kept for the group
    PROVISIONED = "Provisioned"          # the nodes are there (or on their way), kept for the group
    NOT_FOUND = "NotFound"               # Provisioned=False, CapacityIsNotFound: it finds none now, and keeps trying
    ACCEPTED = "Accepted"                # it took the request and is working on it
    PENDING = "Pending"                  # no answer yet

    @property
    def closed(self) -> bool:
        """Whether nothing more comes of the request: a new one must be made to ask again."""
        return self in (Answer.FAILED, Answer.CAPACITY_REVOKED, Answer.CONSUMED, Answer.BOOKING_EXPIRED)


@dataclass(frozen=True, slots=True)
class CapacityRequest:
    """One of our ProvisioningRequests: for the group of the Gang whose uid is `gang`, the `attempt`-th ask; `answer` since `since` (the condition's last transition, or
    the request's creation), with the autoscaler's reason and message."""

    namespace: str
    name: str
    uid: str
    gang: str
    attempt: int
    provisioning_class: str
    answer: Answer
    since: float
    message: str
    templates: tuple[str, ...] = ()  # the PodTemplates its pod sets name: ours, deleted with it
    deleting: bool = False



def placeholder_for(member: Member) -> str | None:
    """The uid of the Gang whose group a placeholder pod holds capacity for; None for any other pod."""
    return member.labels.get(names.CAPACITY_FOR_LABEL)


def attempt_of(labels: Mapping[str, str]) -> int:
    """The attempt an object of ours belongs to (`gangkeeper.io/capacity-attempt`); 0 when unreadable."""
    value = labels.get(names.CAPACITY_ATTEMPT_LABEL, "")
    return int(value) if value.isdigit() else 0
