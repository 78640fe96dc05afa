"""Faults to inject into the HTTP front end, for reliability tests and the client's own tests; all off by default.

Two kinds: drawn (a rate of errors, of conflicts, watch streams cut after a number of events, every
watch answered 410), for campaigns that run long; and scripted (the next request of a verb on a path
answered as a test says, an open watch stream sent a bookmark, ended with 410 or dropped mid-chunk),
for tests that need one fault at one moment.
"""

import random
import threading
from collections import Counter, deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

from sim.api import APIError
from sim.kinds import Kind
from sim.status import status
from sim.store import Watcher

_ERRORS = {500: ("InternalError", "Internal error occurred: injected fault"),
           429: ("TooManyRequests", "Too many requests, please try again later.")}
WRITES = ("POST", "PUT", "PATCH", "DELETE")
WATCH_ACTS = ("bookmark", "expire", "cut")


@dataclass(frozen=True)
class Answer:
    """What a scripted request is answered: its status code, JSON body (none: empty) and headers."""

    code: int
    body: dict | None = None
    headers: tuple[tuple[str, str], ...] = ()


@dataclass
class Faults:
    """Consulted once per request. `error_rate` of requests answer `error_code` (500 or 429; with
    `error_codes`, one of those at random); `conflict_rate` of writes (PATCH, PUT) answer 409
    Conflict, as when another writer changed the object first; watch streams are cut after
    `cut_watch_after` events; `force_gone` answers every watch that names a resourceVersion with
    410 Gone, as after an etcd compaction. `counts` says how many of each were injected.

    Scripted: `answer_next` answers one request, `act_on_watch` acts on one watch stream."""

    error_rate: float = 0.0
    error_code: int = 500
    error_codes: tuple[int, ...] = ()
    conflict_rate: float = 0.0
    cut_watch_after: int | None = None
    force_gone: bool = False
    seed: int | None = None
    counts: Counter = field(default_factory=Counter)
    _random: random.Random = field(init=False, repr=False)
    _lock: threading.Lock = field(init=False, repr=False, default_factory=threading.Lock)
    _answers: list[tuple[str, str, Answer]] = field(init=False, repr=False, default_factory=list)
    _acts: dict[Kind, deque[str]] = field(init=False, repr=False, default_factory=dict)
    _streams: dict[Kind, set[Watcher]] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self):
        self._random = random.Random(self.seed)

    def count(self, what: str) -> None:
        with self._lock:
            self.counts[what] += 1

    def injected_error(self, method: str = "GET") -> APIError | None:
        with self._lock:
            draw = self._random.random()
            code = self._random.choice(self.error_codes) if self.error_codes else self.error_code
            conflict = method in ("PATCH", "PUT") and self._random.random() < self.conflict_rate
        if self.error_rate > 0 and draw < self.error_rate:
            reason, message = _ERRORS.get(code, _ERRORS[500])
            self.count(str(code if code in _ERRORS else 500))
            return APIError(status(code if code in _ERRORS else 500, reason, message,
                                   {"retryAfterSeconds": 1} if code == 429 else {}))
        if conflict:
            self.count("409")
            return APIError(status(409, "Conflict", "Operation cannot be fulfilled: the object has been modified; "
                                   "please apply your changes to the latest version and try again (injected fault)",
                                   {}))
        return None

    # scripted ----------------------------------------------------------------------------------

    def answer_next(self, verb: str, path: str, code: int, body: dict | None = None,
                    headers: dict[str, str] | None = None) -> None:
        """The next request of `verb` (as RBAC names it: `get`, `list`, `watch`, `create`, `patch`,
        `delete`, ...) on `path` (no query) is answered `code`, `body` and `headers`, unserved.
        Several wait their turn in the order given."""
        with self._lock:
            self._answers.append((verb, path, Answer(code, body, tuple((headers or {}).items()))))

    def scripted(self, verb: str, path: str) -> Answer | None:
        """The answer scripted for this request, taken; None when there is none."""
        with self._lock:
            for index, (wanted_verb, wanted_path, answer) in enumerate(self._answers):
                if (wanted_verb, wanted_path) == (verb, path):
                    del self._answers[index]
                    return answer
        return None

    def act_on_watch(self, kind: Kind, act: str) -> None:
        """The watch stream of `kind` open now (or the next one opened) does `act` once it has sent
        the events waiting for it: `bookmark` sends a BOOKMARK at the current resourceVersion,
        `expire` ends the stream with an ERROR event 410 Expired (as after an etcd compaction),
        `cut` drops the connection in the middle of a chunk. Acts are done in the order given."""
        if act not in WATCH_ACTS:
            raise ValueError(f"act on a watch: {act!r} is none of {', '.join(WATCH_ACTS)}")
        with self._lock:
            self._acts.setdefault(kind, deque()).append(act)
            streams = list(self._streams.get(kind, ()))
        for watcher in streams:
            watcher.wake()

    def has_act(self, kind: Kind) -> bool:
        with self._lock:
            return bool(self._acts.get(kind))

    def next_act(self, kind: Kind) -> str | None:
        with self._lock:
            acts = self._acts.get(kind)
            return acts.popleft() if acts else None

    @contextmanager
    def streaming(self, kind: Kind, watcher: Watcher) -> Iterator[None]:
        """While a stream sends `watcher`'s changes: an act on its kind wakes it."""
        with self._lock:
            self._streams.setdefault(kind, set()).add(watcher)
        try:
            yield
        finally:
            with self._lock:
                self._streams[kind].discard(watcher)
