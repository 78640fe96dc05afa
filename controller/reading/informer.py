"""List and watch one resource into a cache of small objects: the controller's view of the cluster.

Like client-go's reflector: list, replace the cache, watch from the list's resourceVersion,
apply each event, and move the resourceVersion on with bookmarks so that a quiet resource can
still resume where it was. A watch that ends is started again from the last resourceVersion; a
410 Gone (an HTTP answer, or an ERROR event carrying a Status with code 410) means the server
no longer has that version and the resource is listed again. Every other failure backs off
exponentially and tries again: the loop never ends until `stop()`.

The cache keeps what `transform` makes of each object, not the object: a pod is kilobytes, and
the planner needs a few fields of it. `transform` returning None drops the object (a pod that
has finished frees its node and needs no decision). `on_object(key, value)` hears of every
change to the cache (see `Cache`), value None meaning gone — a relist reports every key it keeps
and every key it drops — so that a consumer can keep its own index without rescanning the cache.

A resource whose API is not served (a CRD not installed) is switched off with one log line,
counts as synced with nothing in it, and is looked up again every `recheck_seconds`. With
`keeps_unserved`, one that was served and is not any more keeps what it last listed: the Gangs
hold reservations, and an API server that answers 404 for a moment (restarting, before its CRD
handlers are ready) must not free what they book.

While a list is read and cached, the cyclic garbage collector is held off (`uncollected`): what
a list makes lives on (150,000 pods' facts), and every full collection on the way would walk all
of it again, a third of a relist's time. Its JSON is freed by reference counting as pages go.
"""

import gc
import logging
import random
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypedDict

from gangkeeper.controller.reading.kube import Backoff, Gone, Kube, KubeError, NotFound, Resource, WatchStream
from gangkeeper.controller.reading.shapes import Reading

log = logging.getLogger("gangkeeper.controller.informer")

Transform = Callable[[dict], Any]


def object_key(obj: dict) -> str:
    """`namespace/name`, or `name` for a cluster-scoped object, as client-go keys its caches."""
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace")
    return f"{namespace}/{metadata.get('name', '')}" if namespace else str(metadata.get("name", ""))


class Cache:
    """Small objects by key, safe to read from any thread while the informer writes.

    `on_change(key, value)` hears of every change (value None: gone) under the cache's lock, so
    that a `snapshot` never holds a change not yet told: a consumer that keeps its own index from
    what it is told can compare it with a snapshot exactly. It must return quickly.
    """

    def __init__(self, on_change: Callable[[str, Any], None] = lambda key, value: None) -> None:
        self._items: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._on_change = on_change

    def replace(self, items: dict[str, Any]) -> None:
        """Hold `items` from now on: every key dropped is told gone, every key kept is told again."""
        with self._lock:
            previous, self._items = self._items, dict(items)
            for key in previous.keys() - self._items.keys():
                self._on_change(key, None)
            for key, value in self._items.items():
                self._on_change(key, value)

    def put(self, key: str, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._on_change(key, value)

    def remove(self, key: str) -> bool:
        with self._lock:
            present = self._items.pop(key, None) is not None
            if present:
                self._on_change(key, None)
            return present

    def get(self, key: str, default: Any = None) -> Any:
        with self._lock:
            return self._items.get(key, default)

    def snapshot(self) -> dict[str, Any]:
        """A copy to decide on: later events do not change it."""
        with self._lock:
            return dict(self._items)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


def apply_event(cache: Cache, read: Callable[[dict], Any], kind: str, obj: dict) -> bool | None:
    """What one watch event does to a cache: an added or modified object is cached as `read`
    makes it (or dropped when `read` gives None), a deleted one dropped, a bookmark changes
    nothing. Whether the cache changed; None for an event type this does not know."""
    if kind in ("ADDED", "MODIFIED"):
        value = read(obj)
        if value is not None:
            cache.put(object_key(obj), value)
            return True
        return cache.remove(object_key(obj))
    if kind == "DELETED":
        return cache.remove(object_key(obj))
    return False if kind == "BOOKMARK" else None


@contextmanager
def uncollected() -> Iterator[None]:
    """No cyclic garbage collection meanwhile, in any thread (module docstring): for work that
    makes a great many objects that all live on. Collection resumes after it, unless it was
    already off; what is garbage by then is collected later."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _ignore(*_: Any) -> None:
    return None


@dataclass
class Hooks:
    """Callbacks for metrics. `reason` of a watch restart: `closed` (the server ended the watch,
    the normal case), `gone` (a relist follows) or `error` (after a backoff)."""

    watch_restarted: Callable[[str, str], None] = _ignore
    relisted: Callable[[str, int], None] = _ignore
    failed: Callable[[str, Exception], None] = _ignore


class _Scope(TypedDict):
    """Which objects of its resource an informer lists and watches, and what of each it reads:
    keywords of both `Kube.list` and `Kube.watch`."""

    namespace: str | None
    label_selector: str
    field_selector: str
    reading: Reading | None


class Informer:
    """One resource, one thread: `start()`, read `cache`, `stop()`."""

    def __init__(self, kube: Kube, resource: Resource, transform: Transform, *, namespace: str | None = None,
                 label_selector: str = "", field_selector: str = "", reading: Reading | None = None,
                 hooks: Hooks | None = None,
                 on_change: Callable[[str], None] = _ignore,
                 on_object: Callable[[str, Any], None] = _ignore, watch_timeout: float = 300.0,
                 recheck_seconds: float = 60.0, backoff: Backoff | None = None,
                 wait: Callable[[float], Any] | None = None, random: Callable[[], float] = random.random,
                 keeps_unserved: bool = False):
        self.resource = resource
        self.cache = Cache(on_object)
        self.resource_version: str | None = None  # None: the next step lists
        self.hooks = hooks or Hooks()
        self._kube, self._transform, self._on_change = kube, transform, on_change
        self._scope = _Scope(namespace=namespace, label_selector=label_selector, field_selector=field_selector,
                             reading=reading)
        self._watch_timeout, self._recheck_seconds = watch_timeout, recheck_seconds
        self._backoff = backoff or Backoff(initial=0.8, cap=30.0)
        self._random = random
        self._stopped = threading.Event()
        self._wait = wait or self._stopped.wait
        self._synced = threading.Event()
        self._served: bool | None = None
        self._keeps_unserved = keeps_unserved
        self._stream: WatchStream | None = None
        self._thread: threading.Thread | None = None

    @property
    def has_synced(self) -> bool:
        """The cache has held a complete list once (or the resource is known not to be served)."""
        return self._synced.is_set()

    @property
    def served(self) -> bool | None:
        """Whether discovery found the resource served (None: not asked yet)."""
        return self._served

    def start(self) -> "Informer":
        self._thread = threading.Thread(target=self.run, name=f"informer-{self.resource.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """End the loop, interrupting a watch that is waiting for its next event."""
        self._stopped.set()
        stream = self._stream
        if stream is not None:
            stream.interrupt()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def run(self) -> None:
        while not self._stopped.is_set():
            try:
                self._step()
            except Exception as error:  # the loop outlives every failure
                if not self._stopped.is_set():
                    self._failed(error)

    def _step(self) -> None:
        if self.resource_version is None:
            if not self._check_served():
                self._wait(self._recheck_seconds)
                return
            self._relist()
        self._watch()

    def _check_served(self) -> bool:
        resource = self.resource
        served = self._kube.served(resource.group, resource.version, resource.plural)
        if served != self._served:
            if not served and self._keeps_unserved and self._served:
                log.warning("%s (%s/%s) is not served any more: keeping the %d objects last listed (what they "
                            "book stays booked), looking again every %.0fs", resource.name, resource.group,
                            resource.version, len(self.cache.snapshot()), self._recheck_seconds)
            elif not served:
                log.warning("%s (%s/%s) is not served: switched off, looking again every %.0fs",
                            resource.name, resource.group, resource.version, self._recheck_seconds)
                self.cache.replace({})
                self._synced.set()
                self._on_change(resource.name)
            elif self._served is False:
                log.info("%s is served now: listing it", resource.name)
            self._served = served
        return served

    def _relist(self) -> None:
        with uncollected():
            pairs, resource_version = self._kube.list(self.resource, **self._scope, transform=self._keyed)
            small = dict(pairs)
            self.cache.replace(small)
        self.resource_version = resource_version
        self._synced.set()
        self._backoff.reset()
        self.hooks.relisted(self.resource.name, len(small))
        self._on_change(self.resource.name)

    def _watch(self) -> None:
        timeout = int(self._watch_timeout * (1 + self._random()))  # spread the restarts, as client-go does
        try:
            self._stream = self._kube.watch(self.resource, self.resource_version or "", timeout, **self._scope)
            if self._stopped.is_set():
                return
            for kind, obj in self._stream:
                self._apply(kind, obj)
                self._backoff.reset()
        except Gone:
            log.info("%s: resourceVersion %s is gone, listing again", self.resource.name, self.resource_version)
            self.resource_version = None
            self.hooks.watch_restarted(self.resource.name, "gone")
            return
        except KubeError:
            if not self._stopped.is_set():
                self.hooks.watch_restarted(self.resource.name, "error")
            raise
        finally:
            if self._stream is not None:
                self._stream.close()
                self._stream = None
        if not self._stopped.is_set():
            self.hooks.watch_restarted(self.resource.name, "closed")

    def _apply(self, kind: str, obj: dict) -> None:
        changed = apply_event(self.cache, self._small, kind, obj)
        if changed is None:
            log.warning("%s: ignoring a watch event of unknown type %r", self.resource.name, kind)
            return
        if changed:
            self._on_change(self.resource.name)
        self.resource_version = (obj.get("metadata") or {}).get("resourceVersion") or self.resource_version

    def _keyed(self, obj: dict) -> tuple[str, Any] | None:
        value = self._small(obj)
        return None if value is None else (object_key(obj), value)

    def _small(self, obj: dict) -> Any:
        """`transform(obj)`, or None (not cached) when it fails: one bad object never stops the loop."""
        try:
            return self._transform(obj)
        except Exception as error:
            log.warning("%s %s: cannot be read, left out of the cache: %r", self.resource.name, object_key(obj), error)
            return None

    def _failed(self, error: Exception) -> None:
        if isinstance(error, NotFound):  # the resource went away (CRD deleted): ask discovery again
            self._kube.forget_discovery(self.resource.group, self.resource.version)
            self.resource_version = None
        delay = self._backoff.next()
        retry_after = getattr(error, "retry_after", None)
        delay = max(delay, retry_after) if retry_after is not None else delay
        if isinstance(error, KubeError):
            log.warning("%s: %s; trying again in %.1fs", self.resource.name, error, delay)
        else:  # a bug (in a hook, say): keep the traceback
            log.exception("%s: unexpected failure; trying again in %.1fs", self.resource.name, delay)
        self.hooks.failed(self.resource.name, error)
        self._wait(delay)
