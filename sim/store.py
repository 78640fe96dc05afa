"""Committed objects, the global resourceVersion, indexes and the watch history.

The store knows nothing of HTTP, admission or pod rules: it keeps what the API server decided
to commit and answers lists fast (by namespace, label, node) for 50,000 pods. Stored objects are
never mutated in place: every commit stores a new dict, so lists and watch events may share them
without copying; callers that hand objects out copy them (`clone`).
"""

from __future__ import annotations

import json
import logging
import threading
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

import orjson

from sim.api import WatchEvent
from sim.kinds import Kind
from sim.selectors import FieldRequirement, Requirement

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects


def clone(value):
    """A deep copy of a JSON tree, several times faster than `copy.deepcopy`."""
    if isinstance(value, dict):
        return {k: clone(v) if isinstance(v, (dict, list)) else v for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) if isinstance(v, (dict, list)) else v for v in value]
    return value


def to_json(value) -> bytes:
    """The compact JSON of a JSON tree, as `json.dumps` with `(",", ":")` separators parses back, and
    several times faster (orjson); what orjson refuses (a key that is not a string, an integer
    beyond 64 bits) is written by `json` as before."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, separators=(",", ":")).encode()


def key_of(obj: dict) -> Key:
    meta = obj["metadata"]
    return meta.get("namespace", ""), meta["name"]


@dataclass(frozen=True)
class Change:
    """One committed change: the watch event and the object as it was before."""

    rv: int
    kind: Kind
    type: str  # ADDED, MODIFIED, DELETED
    object: dict = field(repr=False)
    old: dict | None = field(repr=False, default=None)


class Watcher:
    """A queue of changes of one kind, filled by the store at commit time, read by a watch stream."""

    def __init__(self, kind: Kind):
        self.kind = kind
        self._changes: deque[Change] = deque()
        self._ready = threading.Condition()
        self._woken = False
        self.closed = False

    def push(self, change: Change) -> None:
        with self._ready:
            self._changes.append(change)
            self._ready.notify()

    def next(self, timeout: float) -> Change | None:
        """The next change, or None when `timeout` passes first, the watcher is closed or woken."""
        with self._ready:
            if not self._changes and not self.closed and not self._woken:
                self._ready.wait(timeout)
            self._woken = False
            return self._changes.popleft() if self._changes else None

    def wake(self) -> None:
        """The stream reading this watcher has something else to do: its wait (or its next) ends at once."""
        with self._ready:
            self._woken = True
            self._ready.notify_all()

    def close(self) -> None:
        with self._ready:
            self.closed = True
            self._ready.notify_all()


class _Table:
    """The objects of one kind with their indexes."""

    def __init__(self):
        self.objects: dict[Key, dict] = {}
        self.by_namespace: dict[str, set[Key]] = {}
        self.by_label: dict[tuple[str, str], set[Key]] = {}
        self.by_node: dict[str, set[Key]] = {}

    def add(self, key: Key, obj: dict) -> None:
        self.objects[key] = obj
        self.by_namespace.setdefault(key[0], set()).add(key)
        for label in (obj["metadata"].get("labels") or {}).items():
            self.by_label.setdefault(label, set()).add(key)
        node = (obj.get("spec") or {}).get("nodeName")
        if node:
            self.by_node.setdefault(node, set()).add(key)

    def discard(self, key: Key) -> None:
        obj = self.objects.pop(key)
        _drop(self.by_namespace, key[0], key)
        for label in (obj["metadata"].get("labels") or {}).items():
            _drop(self.by_label, label, key)
        node = (obj.get("spec") or {}).get("nodeName")
        if node:
            _drop(self.by_node, node, key)


def _drop(index: dict, entry, key: Key) -> None:
    keys = index.get(entry)
    if keys is not None:
        keys.discard(key)
        if not keys:
            del index[entry]


class Store:
    """Every object of the emulated cluster; one lock serialises commits."""

    def __init__(self, history_size: int = 200_000):
        self.lock = threading.RLock()
        self.resource_version = 0
        self._tables: dict[Kind, _Table] = {}
        self._dependents: dict[str, set[tuple[Kind, Key]]] = {}  # owner uid -> dependents
        self._uids: set[str] = set()
        self._history: deque[Change] = deque(maxlen=history_size)
        self.compacted_rv = 0
        self._watchers: set[Watcher] = set()
        self._subscribers: list[Callable[[Change], None]] = []
        self._undelivered: deque[Change] = deque()
        self._delivery = threading.Lock()
        self._delivering = threading.local()
        self._unseen = False

    def _table(self, kind: Kind) -> _Table:
        return self._tables.setdefault(kind, _Table())

    def get(self, kind: Kind, key: Key) -> dict | None:
        return self._table(kind).objects.get(key)

    def exists_uid(self, uid: str) -> bool:
        return uid in self._uids

    def dependents(self, owner_uid: str) -> list[tuple[Kind, Key]]:
        with self.lock:
            return list(self._dependents.get(owner_uid, ()))

    def list(self, kind: Kind, namespace: str | None = None, labels: Iterable[Requirement] = (),
             fields: Iterable[FieldRequirement] = ()) -> list[dict]:
        """Matching objects in key order (namespace, then name), as etcd returns them."""
        labels, fields = list(labels), list(fields)
        with self.lock:
            table = self._table(kind)
            keys = self._candidates(table, namespace, labels, fields)
            objects = [table.objects[k] for k in sorted(keys)] if keys is not None else \
                [table.objects[k] for k in sorted(table.objects)]
        return [o for o in objects if _selected(o, namespace, labels, fields)]

    @staticmethod
    def _candidates(table: _Table, namespace: str | None, labels: list[Requirement],
                    fields: list[FieldRequirement]) -> set[Key] | None:
        """The smallest index entry that contains every match, or None when no index applies."""
        sets = []
        if namespace:
            sets.append(table.by_namespace.get(namespace, set()))
        for requirement in labels:
            pinned = requirement.equality()
            if pinned:
                sets.append(table.by_label.get(pinned, set()))
        for requirement in fields:
            if requirement.field == "spec.nodeName" and not requirement.negated and requirement.value:
                sets.append(table.by_node.get(requirement.value, set()))
        return min(sets, key=len) if sets else None

    def commit(self, kind: Kind, obj: dict, type_: str) -> dict:
        """Store `obj` (ADDED or MODIFIED) under the next resourceVersion; returns the stored object."""
        with self.lock:
            self.resource_version += 1
            obj["metadata"]["resourceVersion"] = str(self.resource_version)
            table, key = self._table(kind), key_of(obj)
            old = table.objects.get(key)
            if old is not None:
                table.discard(key)
                self._unlink_owners(kind, key, old)
            table.add(key, obj)
            self._uids.add(obj["metadata"].get("uid", ""))
            self._link_owners(kind, key, obj)
            self._record(Change(self.resource_version, kind, type_, obj, old))
            return obj

    def remove(self, kind: Kind, key: Key) -> dict:
        """Delete the object; the DELETED event carries it with the resourceVersion of its deletion."""
        with self.lock:
            table = self._table(kind)
            old = table.objects[key]
            table.discard(key)
            self._unlink_owners(kind, key, old)
            self._uids.discard(old["metadata"].get("uid", ""))
            self.resource_version += 1
            gone = dict(old, metadata=dict(old["metadata"], resourceVersion=str(self.resource_version)))
            self._record(Change(self.resource_version, kind, "DELETED", gone, old))
            return gone

    def _link_owners(self, kind: Kind, key: Key, obj: dict) -> None:
        for ref in obj["metadata"].get("ownerReferences") or []:
            self._dependents.setdefault(ref.get("uid", ""), set()).add((kind, key))

    def _unlink_owners(self, kind: Kind, key: Key, obj: dict) -> None:
        for ref in obj["metadata"].get("ownerReferences") or []:
            _drop(self._dependents, ref.get("uid", ""), (kind, key))

    @contextmanager
    def unseen(self) -> Iterator[None]:
        """Changes committed meanwhile (by this thread: others wait for the store) reach no watcher
        or subscriber and leave no history, and a watch from before them is answered 410: what a
        client sees when etcd compacted past changes its watch never showed."""
        with self.lock:
            self._unseen = True
            try:
                yield
            finally:
                self._unseen = False
                self.compacted_rv = self.resource_version

    def _record(self, change: Change) -> None:
        if self._unseen:
            return
        if len(self._history) == self._history.maxlen:
            self.compacted_rv = max(self.compacted_rv, self._history[0].rv)
        self._history.append(change)
        for watcher in list(self._watchers):
            if watcher.kind == change.kind:
                watcher.push(change)
        if self._subscribers:
            self._undelivered.append(change)

    def watch(self, kind: Kind, since: int) -> Watcher:
        """A watcher already holding every change of `kind` after resourceVersion `since`.

        Raises ValueError with the oldest resourceVersion still available when `since` is compacted.
        """
        with self.lock:
            if since < self.compacted_rv:
                raise ValueError(self.compacted_rv + 1)
            watcher = Watcher(kind)
            for change in self._history:
                if change.rv > since and change.kind == kind:
                    watcher.push(change)
            self._watchers.add(watcher)
            return watcher

    def stop_watch(self, watcher: Watcher) -> None:
        with self.lock:
            self._watchers.discard(watcher)
        watcher.close()

    def subscribe(self, callback: Callable[[Change], None]) -> Callable[[], None]:
        with self.lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self.lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)
        return unsubscribe

    def deliver(self) -> None:
        """Hand committed changes to subscribers in commit order, outside the commit lock.

        A subscriber that writes from its callback only queues its change: the loop already running
        delivers it after the current one, so every subscriber sees every change in commit order.
        """
        if getattr(self._delivering, "active", False):
            return
        with self._delivery:
            self._delivering.active = True
            try:
                while True:
                    with self.lock:
                        if not self._undelivered:
                            return
                        change, subscribers = self._undelivered.popleft(), list(self._subscribers)
                    for callback in subscribers:
                        _call(callback, change)
            finally:
                self._delivering.active = False


def _call(callback: Callable[[Change], None], change: Change) -> None:
    try:
        callback(change)
    except Exception:
        log.exception("watch subscriber failed on %s %s", change.type, change.kind.plural)


def _selected(obj: dict, namespace: str | None, labels: list[Requirement], fields: list[FieldRequirement]) -> bool:
    meta = obj["metadata"]
    if namespace and meta.get("namespace") != namespace:
        return False
    object_labels = meta.get("labels") or {}
    return all(r.matches(object_labels) for r in labels) and all(f.matches(obj) for f in fields)


def as_watch_event(change: Change, resource: str) -> WatchEvent:
    return WatchEvent(change.type, resource, clone(change.object))
