"""Training runs: which pods make up one distributed run, and how far the run has got.

A distributed training process blocks in its rendezvous until every rank is up, so a run makes
progress only while all of its pods run; pods that hold GPUs while the run waits for the rest
waste them. The kubelet uses this model to decide when a run's pods finish; the accounting
uses it to count GPU-seconds held usefully and held in waiting. A pod's run is read from the
pod alone (its workload labels), its size and duration from the sim annotations its workload's
pod template carried (falling back to the `WORLD_SIZE` env of PyTorchJob pods or the `PET_NNODES`
env of TrainJob and elastic PyTorchJob pods, the nodes torchrun waits for, the least of an elastic
`MIN:MAX`, then to 1). Without the duration annotation,
a pod whose every container only sleeps (a shell script with `sleep N`, as the ecosystem's shipped
examples are) runs for its longest sleep, so those examples run to their end as applied. A pod
whose containers run real programs (`tune run`, `ray job submit`, `mpirun`) says nothing the
emulation can time: it runs for the cluster's `run_seconds` when it is one that runs to completion
(restartPolicy Never or OnFailure: a Job's), so that such examples finish too, and otherwise, or
when no `run_seconds` is given, until it is stopped (a server, a Ray node: restartPolicy Always).

A workload may run in stages, one after the other: a JobSet's replicated jobs that wait for
others to complete or be ready (`dependsOn`), a Job with more completions than parallelism. A run
finishes with the pods that run when its progress reaches its duration; those of its pods that
had yet to start then, and the workload's pods that come later, are its next stage: a run of its
own, sized and timed by the first of them, with progress of its own. Pods that come while a stage
still runs join it, so roles that rendezvous together (a launcher and the workers it waits for)
are one stage. A workload's figures (when it started and finished, its GPU-seconds) span all its
stages.
"""

import heapq
import re
from dataclasses import dataclass, field
from fractions import Fraction

from gangkeeper.names import GROUP_LABEL, JOB_NAME_LABEL, JOBSET_NAME_LABEL, KUBEFLOW_JOB_NAME_LABEL
from sim.names import DURATION_ANNOTATION, WORLD_SIZE_ANNOTATION
from sim.resources import accelerators, pod_requests

# Workload labels, most specific owner first: a JobSet's pods also carry their Job's labels, and an
# MPIJob's launcher, a Job's pod, its MPIJob's: it runs `mpirun` to its end, a run of its own, while
# the workers it drives serve sshd until deleted.
RUN_LABELS = (
    (JOBSET_NAME_LABEL, "JobSet"),
    (JOB_NAME_LABEL, "Job"),
    (KUBEFLOW_JOB_NAME_LABEL, "PyTorchJob"),
    (GROUP_LABEL, "Group"),
)
# The env a pod's rendezvous waits for its peers by: PyTorchJob's ranks, torchrun's nodes (TrainJob).
WORLD_SIZE_ENV = ("WORLD_SIZE", "PET_NNODES")
KIND_BY_RESOURCE = {"pytorchjobs": "PyTorchJob", "jobsets": "JobSet", "jobs": "Job", "pods": "Pod"}


def run_key(resource: str, obj: dict) -> str:
    """`Kind namespace/name` of the workload an object belongs to (a pod, a Job, the workload)."""
    metadata = obj["metadata"]
    labels = metadata.get("labels") or {}
    namespace = metadata.get("namespace", "")
    for label, kind in RUN_LABELS:
        if labels.get(label):
            return f"{kind} {namespace}/{labels[label]}"
    return f"{KIND_BY_RESOURCE.get(resource, resource)} {namespace}/{metadata['name']}"


def world_size(pod: dict) -> int:
    annotation = (pod["metadata"].get("annotations") or {}).get(WORLD_SIZE_ANNOTATION)
    if annotation:
        return int(annotation)
    for container in (pod.get("spec") or {}).get("containers") or ():
        for env in container.get("env") or ():
            least = str(env.get("value", "")).partition(":")[0]  # torchrun's elastic `MIN:MAX` trains with MIN
            if env.get("name") in WORLD_SIZE_ENV and least.isdigit():
                return int(least)
    return 1


# `sleep N` as a word of a container's command or args (`/bin/sh -c "echo … && sleep 10"`).
_SLEEP = re.compile(r"(?:^|[\s;&|(])sleep\s+([0-9]+(?:\.[0-9]+)?)s?(?=$|[\s;&|)])")


# The restart policies of a pod that exits when its work is done (a Job's pods have one of them).
RUNS_TO_COMPLETION = ("Never", "OnFailure")


def duration(pod: dict, run_seconds: float | None = None) -> float | None:
    """How long the pod's run trains: its duration annotation, else the longest `sleep` of its
    containers when each has one, else `run_seconds` for a pod that runs to completion, else None
    (it runs until stopped)."""
    annotation = (pod["metadata"].get("annotations") or {}).get(DURATION_ANNOTATION)
    if annotation:
        return float(annotation)
    spec = pod.get("spec") or {}
    sleeps = [_sleep(container) for container in spec.get("containers") or ()]
    if sleeps and None not in sleeps:
        return max(sleeps)
    return run_seconds if spec.get("restartPolicy") in RUNS_TO_COMPLETION else None


def _sleep(container: dict) -> float | None:
    line = " ".join(str(word) for word in (container.get("command") or []) + (container.get("args") or []))
    found = [float(match) for match in _SLEEP.findall(line)]
    return sum(found) if found else None


@dataclass(frozen=True)
class Member:
    holding: bool  # bound and not terminal: its requests are taken on a node
    running: bool
    succeeded: bool
    gpus: Fraction
    starting: bool = False  # neither running, finished nor on its way out: it has yet to start


def gpus(pod: dict) -> Fraction:
    return sum(accelerators(pod_requests(pod)).values(), Fraction(0))


def member(pod: dict, known: Member | None = None) -> Member:
    """The pod's part in its run; `known` is its previous part (a pod's requests never change)."""
    phase = (pod.get("status") or {}).get("phase")
    terminal = phase in ("Succeeded", "Failed")
    bound = bool((pod.get("spec") or {}).get("nodeName"))
    leaving = bool(pod["metadata"].get("deletionTimestamp"))
    running = phase == "Running" and not leaving
    return Member(bound and not terminal, running, phase == "Succeeded", known.gpus if known else gpus(pod),
                  starting=not (terminal or running or leaving))


@dataclass
class Run:
    key: str
    size: int
    duration: float | None
    members: dict[str, Member] = field(default_factory=dict)
    held_gpus: Fraction = Fraction(0)
    running: int = 0
    succeeded: int = 0
    progress: float = 0.0
    since: float = 0.0  # last moment the counters below were brought up to date
    started: float | None = None  # first moment all members ran together
    finished: float | None = None
    useful_gpu_seconds: float = 0.0
    waiting_gpu_seconds: float = 0.0
    earlier: "Run | None" = None  # the workload's stage before this one (finished)

    @property
    def together(self) -> bool:
        return self.running >= self.size

    def accrue(self, now: float) -> None:
        elapsed = now - self.since
        self.since = now
        if self.finished is not None or elapsed <= 0:
            return
        if self.together:
            self.progress += elapsed
            self.useful_gpu_seconds += float(self.held_gpus) * elapsed
        else:
            self.waiting_gpu_seconds += float(self.held_gpus) * elapsed

    def completion_moment(self) -> float | None:
        if self.finished is not None or self.duration is None or not self.together:
            return None
        return self.since + max(0.0, self.duration - self.progress)

    def update(self, pod_key: str, new: Member | None) -> None:
        old = self.members.pop(pod_key, None)
        for change, sign in ((old, -1), (new, 1)):
            if change is not None:
                self.held_gpus += sign * change.gpus if change.holding else 0
                self.running += sign * change.running
                self.succeeded += sign * change.succeeded
        if new is not None:
            self.members[pod_key] = new


def pod_name(pod: dict) -> str:
    return f"{pod['metadata'].get('namespace', '')}/{pod['metadata']['name']}"


def stages(run: Run | None) -> list[Run]:
    """The stages of a workload, first to last, from its last."""
    found = []
    while run is not None:
        found.append(run)
        run = run.earlier
    return found[::-1]


class Runs:
    """Every run seen in pod events (each workload's current stage, the earlier ones linked from
    it), with progress and GPU-seconds brought up to date on each change; completions are kept in
    a heap so that finding the next one is cheap."""

    def __init__(self, run_seconds: float | None = None):
        self.run_seconds = run_seconds  # how long a pod that runs to completion runs, when nothing else says
        self.runs: dict[str, Run] = {}  # workload → its current stage
        self._stage_of: dict[str, Run] = {}  # pod → the stage it is part of
        self._declared: dict[str, tuple[int, float | None]] = {}  # pod → the (size, duration) it carries
        self._completions: list[tuple[float, str]] = []

    def observe(self, pod: dict, deleted: bool, now: float) -> Run:
        name = pod_name(pod)
        self._declared.setdefault(name, (world_size(pod), duration(pod, self.run_seconds)))
        run = self._stage_of.get(name)
        part = None if deleted else member(pod, run.members.get(name) if run is not None else None)
        if run is None:
            run = self._stage_to_join(run_key("pods", pod), name, part, now)
        run.accrue(now)
        run.update(name, part)
        if part is None:
            self._stage_of.pop(name, None)
            self._declared.pop(name, None)
        else:
            self._stage_of[name] = run
        if run.together and run.started is None:
            run.started = now
        if run.finished is None and run.succeeded >= run.size:
            self._finish(run, now)
        moment = run.completion_moment()
        if moment is not None:
            heapq.heappush(self._completions, (moment, run.key))
        return run

    def _stage_to_join(self, key: str, name: str, part: Member | None, now: float) -> Run:
        """The workload's current stage; a new one when that has finished and the pod is still to
        run its part (running or starting), or when the workload has none yet."""
        current = self.runs.get(key)
        if current is None or (current.finished is not None and part is not None
                               and (part.running or part.starting)):
            return self._next_stage(key, name, current, now)
        return current

    def _next_stage(self, key: str, name: str, earlier: Run | None, now: float) -> Run:
        size, length = self._declared[name]
        run = self.runs[key] = Run(key, size, length, since=now, earlier=earlier)
        return run

    def _finish(self, run: Run, moment: float) -> None:
        """The run ends with its running pods; those still to start make up the next stage."""
        run.finished = moment
        behind = [name for name, part in run.members.items() if part.starting]
        if not behind:
            return
        following = self._next_stage(run.key, behind[0], run, moment)
        for name in behind:
            part = run.members[name]
            run.update(name, None)
            following.update(name, part)
            self._stage_of[name] = following

    def due(self, now: float) -> list[Run]:
        """Runs whose progress reaches their duration by `now`, marked finished at that moment."""
        done = []
        while self._completions and self._completions[0][0] <= now:
            moment, key = heapq.heappop(self._completions)
            run = self.runs[key]
            if run.completion_moment() != moment:
                continue  # superseded by a later change to the run
            run.accrue(moment)
            self._finish(run, moment)
            done.append(run)
        return done

    def next_due(self) -> float | None:
        while self._completions:
            moment, key = self._completions[0]
            if self.runs[key].completion_moment() == moment:
                return moment
            heapq.heappop(self._completions)
        return None

    def accrue_all(self, now: float) -> None:
        for run in self.runs.values():
            run.accrue(now)
