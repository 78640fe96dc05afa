"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it.

Two replicas run; only the holder of the Lease acts. A candidate takes the Lease when it is
free or expired and renews it every `retry_period`.

Expiry is judged, as in client-go, by *our* clock: the lease is expired when it has not changed
for its duration since we last saw it change. The remote `renewTime` is written for people to
read, never compared with local time, so clock skew between nodes cannot elect two leaders.

Two things go further than client-go, so that the follower takes over within the lease duration
of the leader's last renewal instead of up to two retry periods later:

- the follower *watches* the Lease (a field selector on its name) besides reading it every retry
  period, so it sees a renewal when it is committed, not at its next read; and it wakes when the
  observed Lease expires instead of at its next retry tick;
- the leader's authority is bounded in time: `is_leader` turns false `renew_deadline` after the
  moment the last successful renewal was *sent*, whether or not the loop has run since. The
  follower's countdown starts no earlier than that renewal's commit, so the old leader has stopped
  acting `lease_duration - renew_deadline` (5 s by default) before anyone can take over.

Every write is guarded by the Lease's resourceVersion: of two candidates racing for an expired
Lease, one gets a Conflict and waits.
"""

import enum
import logging
import os
import random
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from gangkeeper.controller.reading.informer import Informer
from gangkeeper.controller.reading.kube import LEASES, MERGE_PATCH, Conflict, Kube, NotFound

log = logging.getLogger("gangkeeper.controller.leader")

JITTER_FACTOR = 1.2  # client-go's: candidates retry after retry_period × (1 + 1.2 × random)


# --- the pure decision ----------------------------------------------------------------------

@dataclass(frozen=True)
class LeaseRecord:
    """The Lease's spec, the part leader election reads and writes."""

    holder: str = ""
    duration_seconds: int = 0
    acquire_time: str = ""
    renew_time: str = ""
    transitions: int = 0

    @classmethod
    def from_lease(cls, lease: Mapping) -> "LeaseRecord":
        spec = lease.get("spec") or {}
        return cls(spec.get("holderIdentity") or "", int(spec.get("leaseDurationSeconds") or 0),
                   spec.get("acquireTime") or "", spec.get("renewTime") or "", int(spec.get("leaseTransitions") or 0))

    def to_spec(self) -> dict:
        return {"holderIdentity": self.holder, "leaseDurationSeconds": self.duration_seconds,
                "acquireTime": self.acquire_time or None, "renewTime": self.renew_time or None,
                "leaseTransitions": self.transitions}


@dataclass(frozen=True)
class Observation:
    """A record as we last saw it, and when (our monotonic clock) we first saw it so."""

    record: LeaseRecord
    at: float


class Action(enum.Enum):
    CREATE = "create"    # no Lease yet
    ACQUIRE = "acquire"  # free or expired: take it over
    RENEW = "renew"      # ours
    WAIT = "wait"        # someone else holds it


def observe(previous: Observation | None, record: LeaseRecord, now: float) -> Observation:
    """Restart the expiry countdown only when the record changed: a holder that renews changes it."""
    if previous is not None and previous.record == record:
        return previous
    return Observation(record, now)


def decide(observation: Observation | None, now: float, me: str, default_duration: float) -> Action:
    """What to do with the Lease as observed (None: it does not exist)."""
    if observation is None:
        return Action.CREATE
    record = observation.record
    if record.holder == me:
        return Action.RENEW
    if record.holder and now < expires_at(observation, default_duration):
        return Action.WAIT
    return Action.ACQUIRE


def claim(record: LeaseRecord | None, me: str, now: datetime, duration: int) -> LeaseRecord:
    """The record that takes (or keeps) the Lease for `me`; a takeover counts one transition."""
    stamp = micro_time(now)
    if record is not None and record.holder == me:
        return replace(record, duration_seconds=duration, renew_time=stamp)
    transitions = record.transitions + 1 if record is not None else 0
    return LeaseRecord(me, duration, stamp, stamp, transitions)


def release(record: LeaseRecord, now: datetime) -> LeaseRecord:
    """What a leader leaving cleanly writes: no holder, expiring in a second, so the other replica
    takes over at its next try instead of after a whole lease duration."""
    stamp = micro_time(now)
    return LeaseRecord("", 1, stamp, stamp, record.transitions)


def must_step_down(last_renewed: float, now: float, renew_deadline: float) -> bool:
    return now - last_renewed >= renew_deadline


def expires_at(observation: Observation, default_duration: float) -> float:
    """When, by our clock, the observed Lease expires unless it changes first."""
    return observation.at + (observation.record.duration_seconds or default_duration)


def micro_time(moment: datetime) -> str:
    """Kubernetes MicroTime: RFC 3339 in UTC with microseconds."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def default_identity() -> str:
    """The pod's name and a random suffix: a restarted pod is a new candidate, never the old holder."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{secrets.token_hex(4)}"


# --- the loop -------------------------------------------------------------------------------

def _ignore() -> None:
    return None


class LeaderElector:
    """Campaign for the Lease `namespace/name` until `stop()`.

    `on_started_leading` and `on_stopped_leading` run on the elector's thread and must return
    quickly (start or stop the controller's work, don't do it). After stepping down the
    elector campaigns again. Act only while `is_leader` holds: it turns false at the renew
    deadline by itself, before `on_stopped_leading` is called.
    """

    def __init__(self, kube: Kube, namespace: str, name: str, identity: str | None = None, *,
                 on_started_leading: Callable[[], Any] = _ignore, on_stopped_leading: Callable[[], Any] = _ignore,
                 lease_duration: int = 15, renew_deadline: float = 10, retry_period: float = 2,
                 clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
                 random: Callable[[], float] = random.random):
        if not lease_duration > renew_deadline > JITTER_FACTOR * retry_period > 0:
            raise ValueError(f"leader election needs lease duration ({lease_duration}s) > renew deadline "
                             f"({renew_deadline}s) > {JITTER_FACTOR} × retry period ({retry_period}s) > 0")
        # A renewal must answer within the deadline: no retries inside the adapter.
        self._kube = kube.with_options(retries=0, timeout=renew_deadline / 2)
        self.namespace, self.name = namespace, name
        self.identity = identity or default_identity()
        self._on_started, self._on_stopped = on_started_leading, on_stopped_leading
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self._clock, self._wall_clock, self._random = clock, wall_clock, random
        self._stopped = threading.Event()
        self._wake = threading.Event()  # stop(), or a Lease released or deleted: try again now
        self._lock = threading.Lock()   # the loop and the watch both update the observation
        self._observation: Observation | None = None
        self._resource_version = ""
        self._renewed_at = 0.0  # when our last successful renewal was sent
        self._leading = False
        self._thread: threading.Thread | None = None
        self._watch: Informer | None = None

    @property
    def is_leader(self) -> bool:
        """Whether we may act now: we hold the Lease and renewed it within the renew deadline."""
        return self._leading and not must_step_down(self._renewed_at, self._clock(), self.renew_deadline)

    def start(self) -> "LeaderElector":
        self._watch = Informer(self._kube, LEASES, LeaseRecord.from_lease, namespace=self.namespace,
                               field_selector=f"metadata.name={self.name}", on_object=self._seen).start()
        self._thread = threading.Thread(target=self.run, name="leader-election", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop campaigning; a leader releases the Lease so that the other replica takes over at once."""
        self._stopped.set()
        self._wake.set()
        if self._watch is not None:
            self._watch.stop(timeout)
        if self._thread is not None:
            self._thread.join(timeout)

    def run(self) -> None:
        while not self._stopped.is_set():
            self.step()
            self._wake.wait(self.pause())
            self._wake.clear()
        if self._leading:
            self._release()
            self._stop_leading()

    def pause(self) -> float:
        """How long to wait before the next try. A leader renews every retry period and wakes at its
        renew deadline to step down; a candidate retries with jitter, but no later than the moment
        the Lease it watches expires."""
        now = self._clock()
        if self._leading:
            return max(0.0, min(self.retry_period, self._renewed_at + self.renew_deadline - now))
        pause = self.retry_period * (1 + JITTER_FACTOR * self._random())
        observation = self._observation
        if observation is not None:
            pause = min(pause, max(0.0, expires_at(observation, self.lease_duration) - now))
        return pause

    def step(self) -> None:
        """One try to acquire or renew, and what follows from it for our leadership. A leader past
        its renew deadline has already stopped acting; it says so before trying again, and a late
        renewal that succeeds starts a new term."""
        sent = self._clock()
        if self._leading and must_step_down(self._renewed_at, sent, self.renew_deadline):
            log.warning("%s did not renew the lease %s/%s within %ss: stepping down", self.identity,
                        self.namespace, self.name, self.renew_deadline)
            self._stop_leading()
        action, written = self._try_acquire_or_renew()
        if written:
            self._renewed_at = sent
            if not self._leading:
                log.info("%s now leads (lease %s/%s)", self.identity, self.namespace, self.name)
                self._leading = True
                self._call(self._on_started)
        elif self._leading and (action is Action.WAIT
                                or must_step_down(self._renewed_at, self._clock(), self.renew_deadline)):
            log.warning("%s lost the lease %s/%s: stepping down", self.identity, self.namespace, self.name)
            self._stop_leading()

    def _try_acquire_or_renew(self) -> tuple[Action | None, bool]:
        """(the decision, whether our record is now written); failures are logged, never raised."""
        try:
            self._read()
            observation = self._observation
            action = decide(observation, self._clock(), self.identity, self.lease_duration)
            if action is not Action.WAIT:
                record = observation.record if observation else None
                self._write(claim(record, self.identity, self._wall_clock(), self.lease_duration),
                            create=action is Action.CREATE)
                return action, True
            return action, False
        except Conflict:
            log.debug("%s: the lease changed while we wrote it", self.identity)
        except Exception as error:  # an API failure is a failed try, never the end of the loop
            log.warning("%s: cannot read or write the lease %s/%s: %s", self.identity, self.namespace, self.name, error)
        return None, False

    def _read(self) -> None:
        try:
            lease = self._kube.get(LEASES, self.namespace, self.name)
        except NotFound:
            with self._lock:
                self._observation = None
            return
        self._remember(lease)

    def _write(self, record: LeaseRecord, create: bool = False) -> None:
        if create:
            lease = self._kube.create(LEASES, self.namespace, {
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace}, "spec": record.to_spec()})
        else:
            patch = {"metadata": {"resourceVersion": self._resource_version}, "spec": record.to_spec()}
            lease = self._kube.patch(LEASES, self.namespace, self.name, patch, MERGE_PATCH)
        self._remember(lease)

    def _remember(self, lease: Mapping) -> None:
        self._resource_version = str((lease.get("metadata") or {}).get("resourceVersion", ""))
        self._observe(LeaseRecord.from_lease(lease))

    def _seen(self, _key: str, record: LeaseRecord | None) -> None:
        """A change the watch delivered. The countdown restarts when the record changed, as for a
        read; a Lease released or deleted wakes a candidate at once."""
        if record is not None:
            self._observe(record)
        if not self._leading and (record is None or not record.holder):
            self._wake.set()

    def _observe(self, record: LeaseRecord) -> None:
        """A read or the watch may deliver an older record after a newer one; that restarts the
        countdown later than needed, never earlier, so it can delay a takeover but not hasten it."""
        with self._lock:
            self._observation = observe(self._observation, record, self._clock())

    def _release(self) -> None:
        observation = self._observation
        if observation is None:
            return
        try:
            self._write(release(observation.record, self._wall_clock()))
        except Exception as error:
            log.warning("%s: could not release the lease (it expires by itself): %s", self.identity, error)

    def _stop_leading(self) -> None:
        self._leading = False
        self._call(self._on_stopped)

    def _call(self, callback: Callable[[], Any]) -> None:
        try:
            callback()
        except Exception:
            log.exception("%s: leadership callback failed", self.identity)
