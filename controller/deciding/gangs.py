"""A group's Gang object: which one it is, what it is called, and what its status says.

The Gang is how people see a group (`kubectl get gangs`). A Gang a user created to declare a
group (`spec.groupName`, which defaults to its name) is the group's Gang and keeps its name.
Otherwise the controller creates one, named for people to read and derived, never random, so
that a restarted controller finds the Gang its predecessor made (docs/design.md, "Group
identity"):
  - a group with an owner: the owner's name (and, for one part of an owner's group such as a
    replicated job of an InOrder JobSet, that part) plus `-` and the first 4 hex characters of
    a SHA-256 of the group key, such as `huge-3f9c` for the Job `huge`;
  - a group without owner (explicit, PodGroup-declared): its label, when that is a valid name;
    else the same readable form with the suffix;
  - when another group's Gang already has that name in the namespace, the next candidate:
    the suffix one character longer, and so on;
  - at most 63 characters, a DNS-1123 label: the readable part is cut to make room for the
    suffix, never the suffix.
A Gang belongs to the group it declares (`spec.groupName`), so the name a group settled on is
found again however the names before it came and went.
"""

import hashlib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache

from gangkeeper import names
from gangkeeper.controller.cache.groups import GANGS, GangView, Workloads, gang_for
from gangkeeper.controller.deciding import elastic
from gangkeeper.controller.deciding.decisions import Phase, Reason, Verdict
from gangkeeper.controller.deciding.memory import Strength
from gangkeeper.controller.model.members import GroupKey, Member
from gangkeeper.controller.model.objects import Owner, Workload
from gangkeeper.resources import accelerator_count

API_VERSION = f"{names.GANG_GROUP}/{names.GANG_VERSION}"
NAME_MAX = 63
SUFFIX_MIN = 4
# An object name (DNS-1123 subdomain) that a group label without an owner may be used as, dots and all.
_OBJECT_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# Sources whose group a user declares with a Gang of their own, found by the group it declares.
_DECLARED_BY_USERS = frozenset({names.SOURCE_EXPLICIT, names.SOURCE_NATIVE_POD_GROUP})

# A waiting group's details (how many placeable, how much free) change with every pod that
# starts or ends; rewriting its Gang on each would cost an API write per waiting group per
# change. Phase, counts and condition reasons are written at once; details at most this often
# (and then at once: the pass that falls due writes them, not the next resync).
STATUS_DETAILS_REFRESH_SECONDS = 10.0
# A group's reservations are written on its Gang while they take at most this much of it (etcd
# stores objects of at most 1.5 MiB; an entry is about 100 bytes): a larger plan is booked on
# each member instead, with the reservation annotation.
RESERVATIONS_MAX_BYTES = 512 * 1024
_ENTRY_BYTES = len('"": {"uid": "", "node": ""}, ')
DEGRADED = "Degraded"  # the condition of a running group with fewer members placed than it had
# Status fields newer than the Gang CRD of an earlier version, whose schema prunes them (docs/operations.md, "Upgrade").
PRUNED_BY_OLDER_CRDS = frozenset({"placed", "peak"})


def keeps_gang(view: GangView, served: bool) -> bool:
    """Whether the group has a Gang object: every group but a lone accelerator pod, whose state
    its Events and the audit log carry, when the API serves Gangs at all. A Gang for each lone
    pod would be one object per single-GPU pod, and its `groupName` (the pod's label) would
    declare a size of 1 for any explicit group that happens to share the name."""
    return served and view.source != names.SOURCE_ACCELERATOR_POD


# --- which Gang, and its name ------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class GangPlace:
    """The group's Gang (`existing`), or the free name to create it under when it has none."""

    name: str
    existing: Workload | None


def find_gang(view: GangView, workloads: Workloads) -> GangPlace | None:
    """Where the group's Gang is or goes; None when another group's Gang holds every name it could
    have (only someone creating Gangs under its names on purpose gets there): it then has none."""
    key = view.group.key
    if view.source in _DECLARED_BY_USERS:
        declared = gang_for(key[0], view.label, workloads)
        if declared is not None:
            return GangPlace(declared.name, declared)
    return _walk(key, view.label, name_candidates(key, view.label, view.owner), workloads)


def ownerless_gang(key: GroupKey, workloads: Workloads) -> Workload | None:
    """The Gang of a group without owner, known by its key alone (its pods are gone)."""
    place = _walk(key, key[1], name_candidates(key, key[1], None), workloads)
    return place.existing if place is not None else None


def name_candidates(key: GroupKey, label: str, owner: Owner | None) -> Iterator[str]:
    """The names the group's Gang may have, in the order it takes the first free one (module docstring).

    When the name is too long, the owner's name is cut before the part of its group: the parts
    of one owner's group share their label, and only their names tell their Gangs apart.
    """
    if owner is None and len(key[1]) <= NAME_MAX and _OBJECT_NAME.fullmatch(key[1]):
        yield key[1]
    head, part = (owner.name, key[1].removeprefix(label)) if owner is not None else (key[1], "")
    head, part = _readable(head) or "group", _readable(part)
    digest = hashlib.sha256("/".join(key).encode()).hexdigest()
    for length in range(SUFFIX_MIN, NAME_MAX - 1):
        room = NAME_MAX - 1 - length
        stem = f"{head[:max(1, room - len(part) - 1)].rstrip('-')}-{part}"[:room] if part else head[:room]
        yield f"{stem.rstrip('-')}-{digest[:length]}"


def _readable(text: str) -> str:
    """`text` in the characters of a DNS-1123 label, starting and ending with a letter or digit."""
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")


def _walk(key: GroupKey, label: str, candidates: Iterator[str], workloads: Workloads) -> GangPlace | None:
    """The first candidate holding a Gang that declares this group, else the first free one.

    While no Gang declares the group (looked up in O(1)), the first free candidate is the answer;
    otherwise every candidate is looked at, since names before the group's may have been freed
    since it took its own.
    """
    namespace = key[0]
    declared = gang_for(namespace, label, workloads) is not None
    free = None
    for name in candidates:
        gang = workloads.get((GANGS, namespace, name))
        if gang is None:
            if not declared:
                return GangPlace(name, None)
            if free is None:
                free = name
        elif gang.group_name == label:
            return GangPlace(name, gang)
    return GangPlace(free, None) if free is not None else None


# --- what it says ------------------------------------------------------------------------------

def gang_status(view: GangView, verdict: Verdict, timed_out: bool, attempts: int, patterns: Sequence[str],
                existing: Mapping, now: float, rollback: str | None = None, preempted: str | None = None,
                stuck: str | None = None, strength: Strength | None = None) -> dict:
    """The Gang's status: phase, counts and conditions, each condition keeping its transition time
    while it holds the same value. `rollback` says what the rollback of this pass did (suspended
    the owner, deleted members and what to resubmit, kept members and what they hold); the
    `RolledBack` condition keeps saying it until the next one. `preempted` says which group took
    this one's place and how; the `Preempted` condition keeps saying it until the next preemption.
    `stuck` says what a group stuck incomplete waits for (`controller.deciding.incomplete`); the `Stuck`
    condition is there only while it is, as `TimedOut` is only while the group is timed out.
    `strength` is what an admitted or running group has placed and had (`controller.deciding.elastic`):
    its peak is kept (`peak`) for a restarted controller, and the `Degraded` condition is there
    only while it has fewer placed than that."""
    live = [m for m in view.group.members if not m.terminal]
    before = {c.get("type"): c for c in existing.get("conditions") or ()}
    admitted = verdict.phase is not Phase.WAITING and verdict.reason is not Reason.MEMBERS_DELETED
    wanted = [("Admitted", admitted, verdict.reason, verdict.message)]
    if timed_out:
        wanted.append(("TimedOut", True, Reason.TIMED_OUT,
                       f"not admitted within {view.group.schedule_timeout_seconds:g}s"))
    if attempts:
        last = rollback or (before.get("RolledBack") or {}).get("message", "").partition(": ")[2]
        wanted.append(("RolledBack", True, Reason.ROLLED_BACK,
                       f"rolled back {attempts} times" + (f": {last}" if last else "")))
    taken = preempted or (before.get("Preempted") or {}).get("message")
    if taken:
        wanted.append(("Preempted", True, Reason.PREEMPTED, taken))
    if stuck:
        wanted.append(("Stuck", True, Reason.INCOMPLETE_GROUP, stuck))
    if strength is not None and strength.degraded:
        wanted.append((DEGRADED, True, Reason.MEMBERS_LOST, elastic.condition_message(strength, view.group)))
    conditions = []
    for kind, holds, why, text in wanted:
        value = "True" if holds else "False"
        previous = before.get(kind) or {}
        since = previous.get("lastTransitionTime") if previous.get("status") == value else None
        conditions.append({"type": kind, "status": value, "reason": str(why), "message": text[:32768],
                           "lastTransitionTime": since or _rfc3339(now)})
    waiting = verdict.phase is Phase.WAITING
    return {"phase": verdict.phase.value, "reason": str(verdict.reason),
            # null removes it (the status is written as a merge patch): only a waiting group has it
            "waitingSince": _rfc3339(view.group.first_seen) if waiting else None,
            "present": len(live), "minCount": view.group.min_count,
            "placed": sum(1 for m in live if m.node or m.reserved_node),
            "peak": strength.peak if strength is not None else None,
            "accelerators": accelerator_count((m.requests for m in live), patterns),
            "conditions": conditions}


def reservations_patch(view: GangView, assignments: Sequence[tuple[Member, str]],
                       existing: Workload | None) -> dict[str, dict | None] | None:
    """The merge patch of the Gang's `status.reservations` that books each (member, node) of
    `assignments` and removes (null) the entries of pods that are gone, finished or replaced by
    another pod of the name. A released member's entry stays while it lives (its pin books its
    node from then on). None when the entries would take more than `RESERVATIONS_MAX_BYTES`."""
    patch: dict[str, dict | None] = {member.name: {"uid": member.uid, "node": node} for member, node in assignments}
    held = existing.reservations if existing is not None else {}
    live = {member.name: member.uid for member in view.group.members if not member.terminal}
    size = 0
    for name, (uid, node) in held.items():
        if name in patch:
            continue
        if live.get(name) == uid:
            size += _ENTRY_BYTES + len(name) + len(uid) + len(node)
        else:
            patch[name] = None
    size += sum(_ENTRY_BYTES + len(name) + len(entry["uid"]) + len(entry["node"])
                for name, entry in patch.items() if entry is not None)
    return patch if size <= RESERVATIONS_MAX_BYTES else None


def gang_body(view: GangView, name: str) -> dict:
    """A new Gang for the group: ours (the managed-by label), owned by the group's owner when it has
    one, naming the parent its members' label names (a child in a tree: `cache.trees`)."""
    metadata: dict = {"name": name, "namespace": view.group.key[0],
                      "labels": {names.MANAGED_BY_LABEL: names.MANAGED_BY_VALUE}}
    if view.owner is not None:
        metadata["ownerReferences"] = [{"apiVersion": view.owner.api_version, "kind": view.owner.kind,
                                        "name": view.owner.name, "uid": view.owner.uid}]
    spec: dict = {"minCount": view.group.min_count, "groupName": view.label}
    if view.parent:  # named by the members' label gangkeeper.io/parent, or their owner's
        spec["parent"] = view.parent
    return {"apiVersion": API_VERSION, "kind": names.GANG_KIND, "metadata": metadata, "spec": spec}


def status_due(current: Mapping, wanted: Mapping, last_written: float | None, now: float) -> float | None:
    """When `wanted` is worth a write over `current` (None: never, it says nothing new): at once
    (`now`) when more than a condition's message changed; when only messages did (the details),
    once this controller's last write (`last_written`, None if it made none) is
    `STATUS_DETAILS_REFRESH_SECONDS` old. A field a Gang CRD older than this controller prunes
    (`PRUNED_BY_OLDER_CRDS`) that the Gang lacks although this controller wrote its status is that
    CRD's doing, not news: writing it again would only be pruned again, pass after pass."""
    wanted = {k: v for k, v in wanted.items()
              if not (k in PRUNED_BY_OLDER_CRDS and k not in current and last_written is not None)}

    def without_messages(status: Mapping) -> dict:
        conditions = [{k: v for k, v in condition.items() if k != "message"}
                      for condition in status.get("conditions") or ()]
        return {**{k: status.get(k) for k in wanted}, "conditions": conditions}

    if {k: current.get(k) for k in wanted} == wanted:
        return None
    if last_written is None or without_messages(current) != without_messages(wanted):
        return now
    return max(now, last_written + STATUS_DETAILS_REFRESH_SECONDS)


@lru_cache(maxsize=1024)  # a pass stamps every group's conditions with the same `now`
def _rfc3339(moment: float) -> str:
    return datetime.fromtimestamp(moment, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
