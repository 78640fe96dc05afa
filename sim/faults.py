"""Faults to inject into the HTTP front end, for reliability tests; all off by default."""

import random
import threading
from collections import Counter
from dataclasses import dataclass, field

from sim.api import APIError
from sim.status import status

_ERRORS = {500: ("InternalError", "Internal error occurred: injected fault"),
           429: ("TooManyRequests", "Too many requests, please try again later.")}
WRITES = ("POST", "PUT", "PATCH", "DELETE")


@dataclass
class Faults:
    """Consulted once per request. `error_rate` of requests answer `error_code` (500 or 429; with
    `error_codes`, one of those at random); `conflict_rate` of writes (PATCH, PUT) answer 409
    Conflict, as when another writer changed the object first; watch streams are cut after
    `cut_watch_after` events; `force_gone` answers every watch that names a resourceVersion with
    410 Gone, as after an etcd compaction. `counts` says how many of each were injected."""

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
