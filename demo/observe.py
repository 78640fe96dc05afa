"""What the demo shows and measures, read from pods and their Gangs: per job, how many pods run, wait,
sit gated, how many GPUs they hold, and how many GPU-seconds were held to no purpose.

Two kinds of waste are told apart, because only one of them is what gang scheduling removes:
- *stranded*: the job holds GPUs while at least one of its pods has no node — neither bound nor
  reserved by the controller (or not even created). Those GPUs wait for capacity that may never
  come: this is the deadlock. gangkeeper's guarantee is that this stays at zero.
- *starting*: the job holds GPUs while every pod has a node but not all containers run yet
  (image pull, container start). Every scheduler pays this; it is shown so nothing is hidden.

The tracker is fed pod and Gang objects with a time (watch events in the emulation, polled lists
on a real cluster) and integrates both exactly between changes. A pod is reserved when its Gang's
`status.reservations` books it (or its own annotation does) and once the controller released it
to its node. It is thread-safe: the cluster
thread feeds it, the terminal view reads snapshots.
"""

import threading
from dataclasses import dataclass, field, replace

from gangkeeper import names
from gangkeeper.resources import accelerators, pod_requests
from sim.reservations import Reservations

TERMINAL = ("Succeeded", "Failed")


@dataclass(frozen=True)
class PodFacts:
    gpus: int
    bound: bool
    terminal: bool
    running: bool
    succeeded: bool
    gated: bool
    reserved: bool  # the controller reserved a node for it, or released it to that node


def pod_facts(pod: dict, reservations: Reservations) -> PodFacts:
    spec, status, meta = pod.get("spec") or {}, pod.get("status") or {}, pod["metadata"]
    phase = status.get("phase") or "Pending"
    gpus = int(sum(accelerators(pod_requests(pod)).values()))
    return PodFacts(gpus=gpus, bound=bool(spec.get("nodeName")), terminal=phase in TERMINAL,
                    running=phase == "Running" and not meta.get("deletionTimestamp"),
                    succeeded=phase == "Succeeded", gated=bool(spec.get("schedulingGates")),
                    reserved=bool(names.RELEASED_AT_ANNOTATION in (meta.get("annotations") or {})
                                  or reservations.node_for(pod)))


def as_created(pod: dict) -> tuple[bool, bool]:
    """(carries our scheduling gate, carries a group label and its source annotation)."""
    meta = pod["metadata"]
    gated = any(g.get("name") == names.SCHEDULING_GATE for g in (pod.get("spec") or {}).get("schedulingGates") or ())
    labelled = bool((meta.get("labels") or {}).get(names.GROUP_LABEL)) and \
        names.GROUP_SOURCE_ANNOTATION in (meta.get("annotations") or {})
    return gated, labelled


@dataclass(frozen=True)
class JobView:
    """One job at one moment, plus what it has cost so far."""

    name: str
    size: int
    created: int = 0
    running: int = 0
    pending: int = 0  # ungated, not bound: the scheduler's queue
    gated: int = 0
    succeeded: int = 0
    held_gpus: int = 0
    submitted: float | None = None
    started: float | None = None  # first moment all pods ran together
    finished: float | None = None
    trained: float = 0.0  # seconds of progress: time all pods ran together
    stranded_gpu_seconds: float = 0.0
    starting_gpu_seconds: float = 0.0

    @property
    def together(self) -> bool:
        return self.running >= self.size


@dataclass
class JobTracker:
    name: str
    size: int
    pods: dict[str, PodFacts] = field(default_factory=dict)
    view: JobView = None  # type: ignore[assignment]
    since: float = 0.0

    def __post_init__(self):
        self.view = JobView(self.name, self.size, submitted=self.since)

    def stranded(self) -> bool:
        """Holding GPUs while some member has no node, bound or reserved."""
        live = [p for p in self.pods.values() if not p.terminal]
        if not self.view.held_gpus or self.view.finished is not None:
            return False
        missing = self.size - len(self.pods)
        return missing > 0 or any(not (p.bound or p.reserved) for p in live)

    def accrue(self, now: float) -> None:
        elapsed, self.since = now - self.since, now
        view = self.view
        if elapsed <= 0 or view.finished is not None:
            return
        if view.together:
            self.view = replace(view, trained=view.trained + elapsed)
        elif self.stranded():
            self.view = replace(view, stranded_gpu_seconds=view.stranded_gpu_seconds + view.held_gpus * elapsed)
        elif view.held_gpus:
            self.view = replace(view, starting_gpu_seconds=view.starting_gpu_seconds + view.held_gpus * elapsed)

    def update(self, key: str, facts: PodFacts | None, now: float) -> None:
        self.accrue(now)
        if facts is None:
            self.pods.pop(key, None)
        else:
            self.pods[key] = facts
        pods = self.pods.values()
        view = replace(
            self.view, created=len(self.pods), running=sum(p.running for p in pods),
            pending=sum(not (p.bound or p.terminal or p.gated) for p in pods),
            gated=sum(p.gated for p in pods), succeeded=sum(p.succeeded for p in pods),
            held_gpus=sum(p.gpus for p in pods if p.bound and not p.terminal))
        if view.started is None and view.together:
            view = replace(view, started=now)
        if view.finished is None and view.succeeded >= self.size:
            view = replace(view, finished=now)
        self.view = view


@dataclass(frozen=True)
class Snapshot:
    at: float  # seconds since the phase began
    jobs: tuple[JobView, ...]
    capacity: int

    @property
    def held_gpus(self) -> int:
        return sum(j.held_gpus for j in self.jobs)


class Observer:
    """Every job of one phase, submitted at `start`, fed pods (`observe`), read as snapshots and a timeline."""

    def __init__(self, job_sizes: dict[str, int], capacity: int, start: float, *, job_of=None):
        self.start = start
        self.capacity = capacity
        self.jobs = {name: JobTracker(name, size, since=start) for name, size in job_sizes.items()}
        self.job_of = job_of or (lambda pod: (pod["metadata"].get("labels") or {}).get(names.KUBEFLOW_JOB_NAME_LABEL))
        self.timeline: list[tuple[float, tuple[int, ...]]] = [(0.0, tuple(0 for _ in job_sizes))]
        self.at_creation: dict[str, tuple[bool, bool]] = {}  # pod → (gated by us, labelled with a group)
        self.reservations = Reservations()
        self._pods: dict[str, dict] = {}  # the jobs' pods as last seen, read again when their Gang changes
        self.lock = threading.Lock()

    def observe(self, pod: dict, deleted: bool, now: float) -> None:
        tracker = self.jobs.get(self.job_of(pod) or "")
        if tracker is None:
            return
        key = f"{pod['metadata'].get('namespace', '')}/{pod['metadata']['name']}"
        with self.lock:
            if key not in self.at_creation:
                self.at_creation[key] = as_created(pod)
            if deleted:
                self._pods.pop(key, None)
            else:
                self._pods[key] = pod
            self._update(tracker, key, None if deleted else pod, now)

    def observe_gang(self, gang: dict, deleted: bool, now: float) -> None:
        """A Gang's reservations: its members are reserved from the moment they are written."""
        with self.lock:
            for key in self.reservations.observe("DELETED" if deleted else "MODIFIED", gang):
                pod = self._pods.get(key)
                tracker = self.jobs.get(self.job_of(pod) or "") if pod is not None else None
                if tracker is not None:
                    self._update(tracker, key, pod, now)

    def _update(self, tracker: JobTracker, key: str, pod: dict | None, now: float) -> None:
        tracker.update(key, None if pod is None else pod_facts(pod, self.reservations), now)
        held = tuple(t.view.held_gpus for t in self.jobs.values())
        if held != self.timeline[-1][1]:
            self.timeline.append((now - self.start, held))

    def snapshot(self, now: float) -> Snapshot:
        with self.lock:
            for tracker in self.jobs.values():
                tracker.accrue(now)
            return Snapshot(now - self.start, tuple(t.view for t in self.jobs.values()), self.capacity)

    def creation_counts(self) -> tuple[int, int, int]:
        """(pods seen, created with our gate, created with a group label) — from each pod's first event."""
        with self.lock:
            seen = list(self.at_creation.values())
        return len(seen), sum(g for g, _ in seen), sum(lbl for _, lbl in seen)
