"""The audit log: one JSON object per line for every decision of either component.

Fields (docs/design.md, "Audit log"): `ts`, `component`, `event`, `namespace`, `group`, `pod`, `uid`,
`user`, `decision`, `reason`, `details`. Callers pass only these small facts — never env
values, secrets or whole pod specs — and `details` is limited to short scalars so that a
careless caller cannot leak a spec into the log either.

Several processes write one log (gunicorn workers, a restarted controller): each record is one
`write` of one line, and the rotating file sink rotates under an `flock` so that two processes
never rotate the same file twice.
"""

import fcntl
import json
import os
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import islice
from typing import IO, Protocol

import orjson

MAX_DETAIL_CHARS = 256
MAX_DETAILS = 16


class Sink(Protocol):
    def write_line(self, line: str) -> None: ...


class StreamSink:
    """Lines to a stream (stdout by default), one write and flush per record."""

    def __init__(self, stream: IO[str] | None = None):
        self._stream = stream
        self._lock = threading.Lock()

    def write_line(self, line: str) -> None:
        stream = self._stream or sys.stdout
        with self._lock:
            stream.write(line + "\n")
            stream.flush()


class RotatingFileSink:
    """Lines appended to `path`; when it passes `max_bytes` it becomes `path.1` (… `path.N`).

    Safe across processes: size check, rotation and write happen under an exclusive lock on
    `path.lock`, and a process notices that another one rotated (the inode changed) and reopens.
    """

    def __init__(self, path: str, max_bytes: int = 50 * 2**20, backups: int = 5):
        if max_bytes < 1 or backups < 1:
            raise ValueError(f"audit rotation needs max_bytes ≥ 1 and backups ≥ 1, got {max_bytes} and {backups}")
        self.path, self.max_bytes, self.backups = path, max_bytes, backups
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = None
        self._inode: int | None = None
        self._lock_file: IO[str] | None = None
        self._pid: int | None = None
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        self._lock_path = path + ".lock"

    def write_line(self, line: str) -> None:
        data = (line + "\n").encode()
        with self._lock:
            lock = self._process_lock()
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                self._rotate_if_full(len(data))
                handle = self._open()
                handle.write(data)
                handle.flush()
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _process_lock(self) -> IO[str]:
        """The lock file, opened once per process: a forked worker must not share its parent's
        open file description, or their flocks would be one lock and exclude nobody."""
        if self._lock_file is None or self._pid != os.getpid():
            self._lock_file = open(self._lock_path, "a")
            self._pid = os.getpid()
            self._file, self._inode = None, None
        return self._lock_file

    def _open(self) -> IO[bytes]:
        try:
            inode = os.stat(self.path).st_ino
        except FileNotFoundError:
            inode = None
        if self._file is None or inode != self._inode:
            if self._file is not None:
                self._file.close()
            self._file = open(self.path, "ab")
            self._inode = os.fstat(self._file.fileno()).st_ino
        return self._file

    def _rotate_if_full(self, incoming: int) -> None:
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            return
        if size == 0 or size + incoming <= self.max_bytes:
            return
        for index in range(self.backups - 1, 0, -1):
            older = f"{self.path}.{index}"
            if os.path.exists(older):
                os.replace(older, f"{self.path}.{index + 1}")
        os.replace(self.path, f"{self.path}.1")


@dataclass
class AuditLog:
    component: str
    sink: Sink

    def record(self, event: str, *, decision: str, reason: str = "", namespace: str = "", group: str = "",
               pod: str = "", uid: str = "", user: str = "", details: Mapping[str, object] | None = None) -> dict:
        entry = {
            "ts": timestamp(),
            "component": self.component,
            "event": event,
            "namespace": namespace,
            "group": group,
            "pod": pod,
            "uid": uid,
            "user": user,
            "decision": decision,
            "reason": reason,
            "details": _small(details or {}),
        }
        self.sink.write_line(_line(entry))
        return entry


def timestamp(now_ns: int | None = None) -> str:
    """`now_ns` (nanoseconds since the epoch, by default now) in UTC with milliseconds, as
    `datetime.now(timezone.utc).isoformat(timespec="milliseconds")` spells it but with `Z`:
    `2026-12-01T22:03:14.123Z`. The date and time of day are formatted once a second (the
    webhook writes a record per request), the milliseconds every time."""
    global _second
    milliseconds = (time.time_ns() if now_ns is None else now_ns) // 1_000_000
    seconds, fraction = divmod(milliseconds, 1000)
    formatted_seconds, prefix = _second
    if seconds != formatted_seconds:
        prefix = datetime.fromtimestamp(seconds, timezone.utc).isoformat()[:19]
        _second = (seconds, prefix)
    return f"{prefix}.{fraction:03d}Z"


# The last second `timestamp` formatted, and its `YYYY-MM-DDTHH:MM:SS`.
_second: tuple[int, str] = (-1, "")


def _line(entry: dict) -> str:
    """The entry as one line of JSON. A string Python holds but UTF-8 cannot (a lone surrogate)
    is written escaped rather than lost or raised: a decision is never refused for its log line."""
    try:
        return orjson.dumps(entry).decode()
    except TypeError:
        return json.dumps(entry, separators=(",", ":"))


def _small(details: Mapping[str, object]) -> dict:
    """Scalars and short lists of scalars only, strings cut to MAX_DETAIL_CHARS; a mapping or
    other object is replaced by its type name, so no nested structure (a spec) gets through."""
    small: dict[str, object] = {}
    for key, value in islice(details.items(), MAX_DETAILS):
        if isinstance(value, str):
            small[str(key)] = value[:MAX_DETAIL_CHARS]
        elif isinstance(value, (bool, int, float)) or value is None:
            small[str(key)] = value
        elif isinstance(value, (list, tuple)) and all(isinstance(v, (str, int, float, bool)) for v in value):
            small[str(key)] = [str(v)[:MAX_DETAIL_CHARS] for v in value[:MAX_DETAILS]]
        else:
            small[str(key)] = f"<{type(value).__name__} omitted>"
    return small


def open_audit_log(component: str, path: str = "", max_bytes: int = 50 * 2**20, backups: int = 5) -> AuditLog:
    """stdout when `path` is empty, else a rotating file."""
    sink: Sink = RotatingFileSink(path, max_bytes, backups) if path else StreamSink()
    return AuditLog(component, sink)
