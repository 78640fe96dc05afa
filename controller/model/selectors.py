"""Selectors, as apimachinery evaluates them: node selector terms (`Term`, their requirements on a
node's labels and fields) and label selectors (`LabelSelector`, on a pod's labels)."""

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

_INT64 = re.compile(r"[+-]?[0-9]+")
_INT64_RANGE = range(-(2**63), 2**63)


@dataclass(frozen=True, slots=True)
class Requirement:
    """One `matchExpressions` or `matchFields` entry of a node selector term."""

    key: str
    operator: str
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Term:
    """A node selector term: every requirement must hold (terms themselves are ORed)."""

    match_expressions: tuple[Requirement, ...]
    match_fields: tuple[Requirement, ...]


def requirement_matches(requirement: Requirement, values: Mapping[str, str]) -> bool:
    """apimachinery `labels.Requirement.Matches`, for node labels and node fields alike."""
    present = requirement.key in values
    value = values.get(requirement.key, "")
    match requirement.operator:
        case "In":
            return present and value in requirement.values
        case "NotIn":
            return not present or value not in requirement.values
        case "Exists":
            return present
        case "DoesNotExist":
            return not present
        case "Gt" | "Lt" if present and len(requirement.values) == 1:
            left, right = int64(value), int64(requirement.values[0])
            if left is None or right is None:
                return False
            return left > right if requirement.operator == "Gt" else left < right
    return False


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """metav1.LabelSelector as apimachinery evaluates it: every requirement must hold.

    `matchLabels` entries are `In [value]` requirements. A nil selector (`NOTHING`) matches
    nothing, an empty one everything. Requirements are sorted so that equal selectors are equal.
    """

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        return not self.nothing and all(requirement_matches(r, labels) for r in self.requirements)

    def merged(self, extra: Iterable[Requirement]) -> "LabelSelector":
        """With `extra` requirements added; a nil selector stays nil, as the API server keeps it."""
        extra = tuple(extra)
        if self.nothing or not extra:
            return self
        return LabelSelector(canonical(self.requirements + extra))

    @property
    def anchor(self) -> tuple[str, tuple[str, ...]] | None:
        """A key and values, one of which every matching pod's labels hold (the narrowest `In`)."""
        if self.nothing:
            return None
        return min(((r.key, r.values) for r in self.requirements if r.operator == "In"),
                   key=lambda anchor: len(anchor[1]), default=None)


NOTHING = LabelSelector(nothing=True)
EVERYTHING = LabelSelector()


def canonical(requirements: Iterable[Requirement]) -> tuple[Requirement, ...]:
    """Requirements without repeats, each with its values sorted, in one order: equal selectors are equal."""
    unique = {Requirement(r.key, r.operator, tuple(sorted(set(r.values)))) for r in requirements}
    return tuple(sorted(unique, key=lambda r: (r.key, r.operator, r.values)))


def int64(text: str) -> int | None:
    """Go's `strconv.ParseInt(text, 10, 64)`: no spaces, no underscores, within int64."""
    if not _INT64.fullmatch(text):
        return None
    value = int(text)
    return value if value in _INT64_RANGE else None
