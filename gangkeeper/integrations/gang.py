"""Gang, `gangs.gangkeeper.io/v1alpha1`: our own CRD, which declares a group and shows its state.

A user creates a Gang to declare the size (`spec.minCount`), schedule timeout and topology
(`spec.topology`: `required`, `preferred`, `sliceRequired`, `sliceSize`, as the members'
`gangkeeper.io/topology-*` annotations say it) of a group whose members carry the group label;
`spec.groupName` names the group and defaults to the Gang's name. The controller creates a Gang
for every group that has none, writes only its status (where `reservations` books the nodes of
the group's gated members: docs/design.md, "Release, binding and rollback"), and deletes the
ones it created (labelled managed-by gangkeeper, with no owner) once their group is gone. Its
members are labelled explicitly, so a Gang has no rule of its own in the webhook (they are plain
pods' explicit groups), and it has no suspend switch.

A Gang may name a parent Gang (`spec.parent`), and a parent says how many of its children must
all be placeable together (`spec.minGroupCount`): a tree of groups admitted as one
(`controller.cache.trees`). A parent has no members of its own.
"""

from collections.abc import Mapping

from gangkeeper import names
from gangkeeper.integrations.kind import Declaration, Integration, Resource

RESOURCE = Resource(names.GANG_GROUP, names.GANG_VERSION, names.GANG_PLURAL, names.GANG_KIND)


def declaration(gang: Mapping) -> Declaration:
    metadata = gang.get("metadata") or {}
    spec = gang.get("spec") or {}
    timeout = spec.get("scheduleTimeoutSeconds")
    labels = metadata.get("labels") or {}
    status = gang.get("status") or {}
    return {"sizes": {"": int(spec.get("minCount") or 0)},
            "group_name": spec.get("groupName") or metadata.get("name", ""),
            "schedule_timeout": float(timeout) if timeout is not None else None,
            "topology": topology(spec),
            "parent": spec["parent"] if isinstance(spec.get("parent"), str) else "",
            "min_group_count": _whole(spec.get("minGroupCount")),
            "status": status,
            "reservations": reservations(status),
            "disposable": labels.get(names.MANAGED_BY_LABEL) == names.MANAGED_BY_VALUE
            and not metadata.get("ownerReferences")}


def _whole(value: object) -> int | None:
    """`spec.minGroupCount` when it is a whole number (the CRD schema and the webhook refuse
    anything else); None when it is not set: the Gang is no parent."""
    if value is None:
        return None
    return value if type(value) is int else 0


def reservations(status: Mapping) -> Mapping[str, tuple[str, str]]:
    """`status.reservations`, the nodes the controller booked for the group's gated members, as
    (uid, node) by pod name. An entry that is not two strings is left out: the CRD schema refuses
    it on the way in, and only the controller writes a Gang's status."""
    booked = status.get("reservations")
    if not isinstance(booked, Mapping):
        return {}
    return {name: (entry["uid"], entry["node"]) for name, entry in booked.items()
            if isinstance(entry, Mapping) and isinstance(entry.get("uid"), str)
            and isinstance(entry.get("node"), str) and entry["node"]}


def topology(spec: Mapping) -> Mapping[str, object]:
    """The `spec.topology` fields the Gang sets, as written: the controller judges them (the CRD
    schema and the webhook refuse bad ones on the way in). A value that is no JSON scalar is
    kept as its text, which no field accepts, so that comparing it never fails."""
    declared = spec.get("topology")
    if not isinstance(declared, Mapping):
        return {}
    return {field: value if isinstance(value, (str, int, float)) else str(value)
            for field in names.GANG_TOPOLOGY_FIELDS if (value := declared.get(field)) is not None}


INTEGRATION = Integration(
    sources=(), resource=RESOURCE, declaration=declaration,
    verbs=frozenset({"list", "watch", "create", "delete"}), status_verbs=frozenset({"patch"}),
)
