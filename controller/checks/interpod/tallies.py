"""The counts `Placements` keeps, each made on first use and then kept up to date pod by pod:
how many pods of one selection each node holds, and per domain of the keys asked about (`Tally`);
a Placements' tallies, found by the labels of a pod that may change them (`Tallies`); the rules
placed pods carry, each with where its carriers are (`Registry`). A selection's anchor (`anchor_of`)
is what finds them."""

from collections.abc import Callable, Hashable, Iterator, Mapping
from types import MappingProxyType
from typing import Generic, TypeVar

from gangkeeper.controller.model.rules import Part

_NO_LABELS: Mapping[str, str] = MappingProxyType({})

Selection = tuple[Part, ...]    # a pod must match every part
Rule = TypeVar("Rule", bound=Hashable)  # what a `Registry` holds: a term, or the terms of one pod
TallyKey = tuple[Selection, bool]  # and, when True, be bound


def anchor_of(selection: Selection) -> tuple[str, tuple[str, ...]] | None:
    for selector, _, _ in selection:
        anchor = selector.anchor
        if anchor is not None:
            return anchor
    return None


class Tally:
    """How many pods of one selection each node holds, and per domain of the keys asked about."""

    VIEWS = 64  # spread scopes remembered per tally
    __slots__ = ("per_node", "total", "by_key", "views")

    def __init__(self) -> None:
        self.per_node: dict[str, int] = {}
        self.total = 0
        self.by_key: dict[str, dict[str, int]] = {}  # topology key → value → pods
        self.views: dict[tuple[str, frozenset[str], tuple[str, ...]], dict[str, int]] = {}  # spread domains

    def bump(self, node: str, delta: int, labels: Mapping[str, str]) -> None:
        _add(self.per_node, node, delta)
        self.total += delta
        for key, counts in self.by_key.items():
            if key in labels:
                _add(counts, labels[key], delta)
        for (key, scope, required), counts in self.views.items():
            if node in scope and all(k in labels for k in required):
                _add(counts, labels[key], delta)

    def by(self, key: str, node_labels: Mapping[str, Mapping[str, str]]) -> Mapping[str, int]:
        """Pods per value of `key`, on the nodes that have it."""
        counts = self.by_key.get(key)
        if counts is None:
            counts = self.by_key[key] = {}
            for node, count in self.per_node.items():
                labels = node_labels.get(node, _NO_LABELS)
                if key in labels:
                    _add(counts, labels[key], count)
        return counts

    def spread(self, key: str, scope: frozenset[str], required: tuple[str, ...],
               node_labels: Mapping[str, Mapping[str, str]]) -> Mapping[str, int]:
        """Pods per value of `key`, on the nodes of `scope` that have every `required` key."""
        view = (key, scope, required)
        counts = self.views.get(view)
        if counts is None:
            if len(self.views) >= self.VIEWS:
                self.views.clear()
            counts = self.views[view] = {}
            for node, count in self.per_node.items():
                labels = node_labels.get(node, _NO_LABELS)
                if node in scope and all(k in labels for k in required):
                    _add(counts, labels[key], count)
        return counts

    def forget_views(self) -> None:
        self.by_key.clear()
        self.views.clear()

    def clone(self) -> "Tally":
        clone = Tally()
        clone.per_node, clone.total = dict(self.per_node), self.total
        clone.by_key = {key: dict(counts) for key, counts in self.by_key.items()}
        clone.views = {view: dict(counts) for view, counts in self.views.items()}
        return clone


def _add(counts: dict[str, int], key: str, delta: int) -> None:
    count = counts.get(key, 0) + delta
    if count:
        counts[key] = count
    else:
        counts.pop(key, None)


class Tallies:
    """A Placements' tallies, found by the labels of a pod that may change them."""

    __slots__ = ("by_key", "anchored", "general")

    def __init__(self) -> None:
        self.by_key: dict[TallyKey, Tally] = {}
        self.anchored: dict[tuple[str, str], list[TallyKey]] = {}
        self.general: list[TallyKey] = []  # selections without an anchor: every pod may change them

    def insert(self, key: TallyKey, tally: Tally) -> None:
        self.by_key[key] = tally
        anchor = anchor_of(key[0])
        if anchor is None:
            self.general.append(key)
        else:
            for value in anchor[1]:
                self.anchored.setdefault((anchor[0], value), []).append(key)

    def matching(self, labels: Mapping[str, str]) -> Iterator[TallyKey]:
        yield from self.general
        for item in labels.items():
            yield from self.anchored.get(item, ())

    def clear(self) -> None:
        self.by_key.clear()
        self.anchored.clear()
        self.general.clear()


class Registry(Generic[Rule]):
    """Rules carried by placed pods, each with a tally of where its carriers are, found by the
    labels of a pod the rules may concern. Copy-on-write: a copy shares the carriers' tallies
    until either side changes one; the rules per anchor are frozensets, replaced, never changed."""

    __slots__ = ("carriers", "anchored", "general", "_private")

    def __init__(self) -> None:
        self.carriers: dict[Rule, Tally] = {}
        self.anchored: dict[tuple[str, str], frozenset[Rule]] = {}
        self.general: frozenset[Rule] = frozenset()
        self._private: set[Rule] | None = None  # rules whose tally is ours alone; None: all of them

    def bump(self, rule: Rule, selection: Selection, node: str, delta: int, labels: Mapping[str, str]) -> None:
        tally = self._own(rule)
        if tally is None:
            tally = self.carriers[rule] = Tally()
            self._index(rule, selection, frozenset.union)
        tally.bump(node, delta, labels)
        if not tally.total:
            del self.carriers[rule]
            self._index(rule, selection, frozenset.difference)

    def candidates(self, labels: Mapping[str, str]) -> Iterator[Rule]:
        yield from self.general
        for item in labels.items():
            yield from self.anchored.get(item, ())

    def forget_views(self, node: str) -> None:
        for rule in [rule for rule, tally in self.carriers.items() if node in tally.per_node]:
            tally = self._own(rule)
            if tally is not None:
                tally.forget_views()

    def copy(self) -> "Registry[Rule]":
        clone: Registry[Rule] = Registry()
        clone.carriers, clone.anchored, clone.general = dict(self.carriers), dict(self.anchored), self.general
        self._private, clone._private = set(), set()
        return clone

    def _own(self, rule: Rule) -> "Tally | None":
        tally = self.carriers.get(rule)
        if self._private is not None and rule not in self._private:
            self._private.add(rule)
            if tally is not None:
                tally = self.carriers[rule] = tally.clone()
        return tally

    def _index(self, rule: Rule, selection: Selection, change: Callable) -> None:
        """`change` is frozenset.union (a new rule) or frozenset.difference (its last carrier went)."""
        anchor = anchor_of(selection)
        if anchor is None:
            self.general = change(self.general, (rule,))
            return
        for value in anchor[1]:
            rules = change(self.anchored.get((anchor[0], value), frozenset()), (rule,))
            if rules:
                self.anchored[(anchor[0], value)] = rules
            else:
                self.anchored.pop((anchor[0], value), None)
