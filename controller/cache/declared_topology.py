"""A group's topology rule (`model.members.TopologyRule`), from its live members'
`gangkeeper.io/topology-*` annotations and its Gang's `spec.topology`, field by field: a member
or Gang that leaves a field unset does not disagree, it leaves it to the others. The rule must be
one the planner can follow: label keys, a slice size with its label, a size that divides the
group's min count. Otherwise the group gets a problem (`cache.groups`) and nothing of it is
reserved.
"""

from collections.abc import Mapping
from typing import Any

from gangkeeper import names
from gangkeeper.controller.model.members import NO_TOPOLOGY, Member, TopologyRule
from gangkeeper.controller.model.objects import Workload
from gangkeeper.integrations.finding import LABEL_KEY_RULE, is_valid_label_key
from gangkeeper.wording import first_of

# TopologyRule's fields, with the annotation and the Gang field that declare each.
_TOPOLOGY_FIELDS = tuple(zip(("required", "preferred", "slice_required", "slice_size"),
                             names.TOPOLOGY_ANNOTATIONS, names.GANG_TOPOLOGY_FIELDS, strict=True))
_LABEL_KEY_FIELDS = _TOPOLOGY_FIELDS[:3]
_SHOWN_CHARS = 64


def group_topology(live: list[Member], gang: Workload | None,
                   min_count: int) -> tuple[TopologyRule, tuple[str, str] | None]:
    """The group's topology from its live members' annotations and its Gang's `spec.topology`,
    field by field, or the problem that stops it: members, or members and the Gang, that
    disagree (`Disagreement`), or a rule the planner cannot follow (`InvalidTopology`, every
    fault at once). Never raises, whatever the members or the Gang hold."""
    declared_by_gang, gang_name = (gang.topology, gang.name) if gang is not None else ({}, "")
    if not declared_by_gang and all(member.topology == NO_TOPOLOGY for member in live):
        return NO_TOPOLOGY, None
    # As written, of any JSON type, until `_topology_faults` finds none at fault: a TopologyRule's then.
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for attribute, annotation, gang_field in _TOPOLOGY_FIELDS:
        said: dict[object, list[str]] = {}
        for member in live:
            value = getattr(member.topology, attribute)
            if value is not None:
                said.setdefault(value, []).append(member.name)
        if len(said) > 1:
            return NO_TOPOLOGY, ("Disagreement", f"members' {annotation} disagree ({_who_says(said)}): give them one")
        gang_value = declared_by_gang.get(gang_field)
        if said and gang_value is not None and not any(gang_value == value for value in said):
            return NO_TOPOLOGY, ("Disagreement",
                                 f"members' {annotation} and Gang {gang_name}'s spec.topology.{gang_field} disagree "
                                 f"({_who_says(said)}; the Gang says {_shown(gang_value)}): give them one")
        if said:
            values[attribute], origins[attribute] = next(iter(said)), annotation
        elif gang_value is not None:
            values[attribute], origins[attribute] = gang_value, f"Gang {gang_name}'s spec.topology.{gang_field}"
    faults = _topology_faults(values, origins, min_count)
    if faults:
        return NO_TOPOLOGY, ("InvalidTopology", "; ".join(faults))
    return TopologyRule(**values), None


def _topology_faults(values: Mapping[str, object], origins: Mapping[str, str], min_count: int) -> list[str]:
    """What keeps the planner from following the rule, each naming where it was declared."""
    faults = [f"{origins[attribute]} {_quoted(values[attribute])} is not accepted: write {LABEL_KEY_RULE}"
              for attribute, _, _ in _LABEL_KEY_FIELDS
              if attribute in values and not is_valid_label_key(values[attribute])]
    size = values.get("slice_size")
    for present, absent in (("slice_size", "slice_required"), ("slice_required", "slice_size")):
        if present in values and absent not in values:
            faults.append(f"{origins[present]} is set without {_counterpart(origins[present], absent)}: "
                          f"a slice needs both the label its members share and its size; give both, or neither")
    low, high = names.SLICE_SIZE_RANGE
    if size is not None and not (type(size) is int and low <= size <= high):
        # An annotation that is no whole number was read as 0 (`reading.pods.member_topology`): not shown.
        shown = "" if size == 0 and not origins["slice_size"].startswith("Gang ") else f" {_quoted(size)}"
        faults.append(f"{origins['slice_size']}{shown} is not accepted: write the members in one slice, "
                      f"a whole number from {low} to {high}")
    elif size is not None and min_count % size:
        faults.append(f"group of {min_count} is not a multiple of {origins['slice_size']} {size}")
    return faults


def _counterpart(origin: str, attribute: str) -> str:
    """The field that declares `attribute` beside `origin`: the annotation, or the Gang's field."""
    annotation, gang_field = next((a, g) for name, a, g in _TOPOLOGY_FIELDS if name == attribute)
    return f"spec.topology.{gang_field}" if origin.startswith("Gang ") else annotation


def _who_says(said: Mapping[object, list[str]]) -> str:
    """`a says X, b, c say Y`: up to three members per value, values in a stable order."""
    parts = []
    for value, who in sorted(said.items(), key=lambda item: str(item[0])):
        parts.append(f"{first_of(sorted(who), 3)} {'says' if len(who) == 1 else 'say'} {_shown(value)}")
    return ", ".join(parts)


def _shown(value: object) -> str:
    """The value cut to a length a message can hold (an annotation may be 256 KiB)."""
    text = str(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"


def _quoted(value: object) -> str:
    return _shown(f'"{value}"' if isinstance(value, str) else value)
