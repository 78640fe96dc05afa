"""Faults to inject into the HTTP front end, for reliability tests; all off by default."""

import random
from dataclasses import dataclass, field

from sim.api import APIError
from sim.status import status

_ERRORS = {500: ("InternalError", "Internal error occurred: injected fault"),
           429: ("TooManyRequests", "Too many requests, please try again later.")}


@dataclass
class Faults:
    """Consulted once per request. `error_rate` of requests answer `error_code` (500 or 429);
    watch streams are cut after `cut_watch_after` events; `force_gone` answers every watch that
    names a resourceVersion with 410 Gone, as after an etcd compaction."""

    error_rate: float = 0.0
    error_code: int = 500
    cut_watch_after: int | None = None
    force_gone: bool = False
    seed: int | None = None
    _random: random.Random = field(init=False, repr=False)

    def __post_init__(self):
        self._random = random.Random(self.seed)

    def injected_error(self) -> APIError | None:
        if self.error_rate <= 0 or self._random.random() >= self.error_rate:
            return None
        reason, message = _ERRORS.get(self.error_code, _ERRORS[500])
        body = status(self.error_code, reason, message, {"retryAfterSeconds": 1} if self.error_code == 429 else {})
        return APIError(body)
