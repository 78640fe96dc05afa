"""What gangkeeper asked autoscalers for, by the Gang it is for (its uid): the ProvisioningRequests
and the placeholder pods (docs/design.md, "Autoscaled clusters"). The index keeps it up to date
from the requests' informer and from every pod change; the pass reads it."""

from typing import TypeVar

from gangkeeper.controller.model.capacity import CapacityRequest, placeholder_for
from gangkeeper.controller.model.members import Member

PROVISIONING_REQUESTS = "provisioningrequests.autoscaling.x-k8s.io"
Entry = TypeVar("Entry")


class Asked:
    def __init__(self) -> None:
        self._requests: dict[str, dict[str, CapacityRequest]] = {}  # Gang uid → request key → request
        self._gang_of_request: dict[str, str] = {}
        self._placeholders: dict[str, dict[str, Member]] = {}       # Gang uid → pod key → placeholder

    def put_request(self, key: str, request: CapacityRequest | None) -> None:
        """A request seen (or gone: None) under its informer key, `namespace/name`."""
        previous = self._gang_of_request.pop(key, None)
        if previous is not None:
            _drop(self._requests, previous, key)
        if request is not None:
            self._gang_of_request[key] = request.gang
            self._requests.setdefault(request.gang, {})[key] = request

    def put_pod(self, key: str, old: Member | None, new: Member | None) -> None:
        """A pod changed: kept when it is a placeholder that has not finished."""
        before = placeholder_for(old) if old is not None else None
        after = placeholder_for(new) if new is not None and not new.terminal else None
        if before is not None:
            _drop(self._placeholders, before, key)
        if after is not None and new is not None:
            self._placeholders.setdefault(after, {})[key] = new

    def requests(self, gang: str) -> tuple[CapacityRequest, ...]:
        return tuple(self._requests.get(gang, {}).values())

    def placeholders(self, gang: str) -> tuple[Member, ...]:
        return tuple(self._placeholders.get(gang, {}).values())

    def gangs(self) -> set[str]:
        """Every Gang something was asked for (and still stands)."""
        return set(self._requests) | set(self._placeholders)

    def __bool__(self) -> bool:
        return bool(self._requests or self._placeholders)


def _drop(table: dict[str, dict[str, Entry]], gang: str, key: str) -> None:
    entries = table.get(gang)
    if entries is not None:
        entries.pop(key, None)
        if not entries:
            del table[gang]
