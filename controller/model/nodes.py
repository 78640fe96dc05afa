"""A node as placement reads it, and the taints that keep pods off it unless they tolerate them."""

from collections.abc import Mapping
from dataclasses import dataclass

from gangkeeper.resources import Amount


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    allocatable: Mapping[str, Amount]  # Fractions as read; with the whole counts DRA serves (`Occupancy.capacity`)
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    ready: bool
