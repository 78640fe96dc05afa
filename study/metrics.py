"""What a run cost, measured from the pods alone, the same way under every policy.

`Holdings` is a cluster component that watches pods and splits, per training run (one workload,
`sim.training.run_key`), the GPU-seconds its pods hold into three kinds:
  - useful: all `size` members run, so the run trains (what `sim.accounting` calls useful);
  - partial: some members are bound to nodes and others are not — an incomplete group holding
    GPUs that nothing can use, the waste (and, when it lasts forever, the deadlock) gang
    scheduling exists to prevent;
  - start-up: every member is bound but not all of them run yet (the kubelet's start delay) —
    the same few seconds per job under every policy, reported apart so that it is not
    mistaken for partial placement.
partial + start-up is what `sim.accounting.Accounting` reports as waiting GPU-seconds.

`Preemptions` is a cluster component that watches pods and Events and counts, per training run,
the preemptions that hit it and the training they interrupted (see its docstring).

`summarise` turns the per-job rows of a run into the study's figures, and `by_class` the rows of
the jobs of one PriorityClass into the priority mix's; both are pure.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import mean

from gangkeeper.controller.deciding.decisions import Reason
from gangkeeper.names import CAPACITY_FOR_LABEL
from gangkeeper.quantity import parse_quantity
from gangkeeper.resources import accelerators, pod_requests
from sim.api import WatchEvent
from sim.names import NODE_GROUP_LABEL, NODES, PODS
from sim.scheduler import preempted_by_scheduler
from sim.training import Member, member, run_key, world_size

EVENTS = "events"


@dataclass
class _Run:
    size: int
    members: dict = field(default_factory=dict)  # pod key → sim.training.Member
    since: float = 0.0
    useful: float = 0.0
    partial: float = 0.0
    startup: float = 0.0

    def accrue(self, now: float) -> None:
        elapsed, self.since = now - self.since, now
        if elapsed <= 0:
            return
        held = sum(m.gpus for m in self.members.values() if m.holding)
        if not held:
            return
        bound = sum(1 for m in self.members.values() if m.holding)
        running = sum(1 for m in self.members.values() if m.running)
        if running >= self.size:
            self.useful += float(held) * elapsed
        elif bound >= self.size:
            self.startup += float(held) * elapsed
        else:
            self.partial += float(held) * elapsed

    def state(self) -> str:
        bound = sum(1 for m in self.members.values() if m.holding)
        if not bound:
            return "unplaced"
        return "partial" if bound < self.size else "placed"


class Holdings:
    resources = (PODS,)

    def __init__(self):
        self.runs: dict[str, _Run] = {}

    def observe(self, event: WatchEvent, now: float) -> None:
        pod = event.object
        key = run_key(PODS, pod)
        run = self.runs.get(key)
        if run is None:
            run = self.runs[key] = _Run(world_size(pod), since=now)
        run.accrue(now)
        name = f"{pod['metadata'].get('namespace', '')}/{pod['metadata']['name']}"
        if event.type == "DELETED":
            run.members.pop(name, None)
        else:
            run.members[name] = member(pod, run.members.get(name))

    def step(self, now: float) -> bool:
        return False

    def next_due(self) -> float | None:
        return None

    def snapshot(self, now: float) -> dict[str, dict]:
        """Per run: GPU-seconds of each kind up to `now`, and whether it is placed at `now`."""
        rows = {}
        for key, run in self.runs.items():
            run.accrue(now)
            rows[key] = {"useful": run.useful, "partial": run.partial, "startup": run.startup,
                         "state": run.state()}
        return rows


def percentile(values: list[float], fraction: float) -> float | None:
    """Nearest-rank percentile: the smallest value with at least `fraction` of values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def summarise(jobs: list[dict], *, cluster_gpus: int, window: tuple[float, float], horizon: float,
              useful_in_window: float) -> dict:
    """The study's figures for one policy at one load.

    `jobs`: one row per job with `submitted`, `started`, `finished` (None when it did not),
    `partial`, `startup`, `useful` GPU-seconds up to the horizon and `state` at the horizon.
    `useful_in_window`: useful GPU-seconds accrued within `window` (the arrival span after a
    warm-up, where the offered load applies); utilisation is that over the window's GPU-seconds.
    """
    started = [j for j in jobs if j["started"] is not None]
    finished = [j for j in jobs if j["finished"] is not None]
    unfinished = [j for j in jobs if j["finished"] is None]
    delays = [j["started"] - j["submitted"] for j in started]
    first_submit = min(j["submitted"] for j in jobs)
    span = window[1] - window[0]
    return {
        "jobs": len(jobs),
        "never_started": len(jobs) - len(started),
        "not_completed": len(unfinished),
        "stuck_partial": sum(1 for j in unfinished if j["state"] == "partial"),
        "partial_gpu_hours": sum(j["partial"] for j in jobs) / 3600,
        "startup_gpu_hours": sum(j["startup"] for j in jobs) / 3600,
        "useful_gpu_hours": sum(j["useful"] for j in jobs) / 3600,
        "utilisation": useful_in_window / (cluster_gpus * span) if span > 0 else None,
        "mean_delay_s": mean(delays) if delays else None,
        "p95_delay_s": percentile(delays, 0.95),
        "makespan_s": (max(j["finished"] for j in finished) - first_submit) if finished else None,
        "all_completed": not unfinished,
        "horizon_s": horizon - first_submit,
    }


@dataclass
class _Preempted:
    size: int
    members: dict[str, Member] = field(default_factory=dict)  # pod key → its part in the run
    together_since: float | None = None  # when all `size` members last began to run together
    finished: bool = False
    moments: set[float] = field(default_factory=set)  # when some of its pods were preempted
    marked: bool = False  # preempted since it last ran together, and no interruption counted for it yet
    unattributed: float | None = None  # GPU-seconds trained before an interruption no preemption explains yet
    interruptions: int = 0
    other_interruptions: int = 0
    at_stake: float = 0.0

    @property
    def together(self) -> bool:
        return sum(1 for m in self.members.values() if m.running) >= self.size

    def mark(self, now: float) -> None:
        self.moments.add(now)
        if self.unattributed is not None:
            self._count(self.unattributed)
        else:
            self.marked = True

    def change(self, key: str, new: Member | None, now: float) -> None:
        was_together = self.together
        held = float(sum(m.gpus for m in self.members.values() if m.holding))
        self.members.pop(key, None)
        if new is not None:
            self.members[key] = new
        if self.finished:
            return
        if new is not None and new.succeeded:
            self.finished = True
        elif was_together and not self.together:
            trained = held * (now - self.together_since)
            if self.marked:
                self._count(trained)
            else:
                self.unattributed = trained
        elif self.together and not was_together:
            self.together_since, self.marked = now, False
            self.other_interruptions += self.unattributed is not None
            self.unattributed = None

    def _count(self, trained: float) -> None:
        self.interruptions += 1
        self.at_stake += trained
        self.marked, self.unattributed = False, None


class Preemptions:
    """Per training run (`sim.training.run_key`): the preemptions that hit it and the training
    they interrupted, from what the cluster shows.

    A pod is preempted when the kube-scheduler marks it (condition DisruptionTarget, reason
    PreemptionByScheduler: its DefaultPreemption, just before it deletes the pod) or when
    gangkeeper reports it (an Event of reason `Preempted` about the pod: written when it
    suspends the pod's job, or deletes the pod's group, to make room for a group of higher
    priority). A run is a victim once any of its pods is; `moments` are the distinct moments
    that happened at.

    An interruption is a run that trained (all `size` members running together) and stops: a
    member is marked for deletion or deleted while it runs (not a member succeeding: that is the
    run finishing). It is preemption's when one of the run's pods was preempted at that moment
    or before it — since the run last began to run together — or is preempted after it, before
    the run runs together again (gangkeeper's Event may come after the operator has begun to
    delete the pods). Any other is counted apart (`other_interruptions`): none is expected in
    these replays, where nothing else deletes a running pod.

    `at_stake` (GPU-seconds): for each interruption by preemption, the GPUs the run held × the
    seconds it had trained since it last began to run together — the progress a job that keeps
    no checkpoint throws away, as it restarts from its first step once its pods are back. The
    emulated training keeps that progress instead (`sim.training.Run.progress` belongs to the
    workload, not to its pods, and is never reset), so in these replays an interrupted job
    resumes where it stopped and trains that time only once: what preemption costs there is the
    waiting, and the GPUs the victim's remaining pods hold meanwhile (`Holdings`' partial).
    """

    resources = (PODS, EVENTS)

    def __init__(self):
        self.runs: dict[str, _Preempted] = {}
        self.run_of: dict[str, str] = {}  # pod key → its run's key
        self.marked: set[str] = set()  # uids of live pods seen with the scheduler's DisruptionTarget

    def observe(self, event: WatchEvent, now: float) -> None:
        obj = event.object
        if event.resource == EVENTS:
            involved = obj.get("involvedObject") or {}
            key = self.run_of.get(f"{involved.get('namespace', '')}/{involved.get('name', '')}")
            if event.type != "DELETED" and obj.get("reason") == Reason.PREEMPTED and involved.get("kind") == "Pod" \
                    and key is not None:
                self.runs[key].mark(now)
            return
        key = run_key(PODS, obj)
        run = self.runs.get(key)
        if run is None:
            run = self.runs[key] = _Preempted(world_size(obj))
        name = f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"
        self.run_of[name] = key
        deleted, uid = event.type == "DELETED", obj["metadata"].get("uid", name)
        if deleted:
            self.marked.discard(uid)
        elif uid not in self.marked and preempted_by_scheduler(obj):
            self.marked.add(uid)
            run.mark(now)
        run.change(name, None if deleted else member(obj, run.members.get(name)), now)

    def step(self, now: float) -> bool:
        return False

    def next_due(self) -> float | None:
        return None

    def snapshot(self) -> dict[str, dict]:
        """Per run that was preempted or interrupted: `preemptions` (distinct moments its pods were
        preempted), `interruptions` by preemption, `at_stake` GPU-seconds, `other_interruptions`
        (an interruption still unexplained counts as one)."""
        return {key: {"preemptions": len(run.moments), "interruptions": run.interruptions, "at_stake": run.at_stake,
                      "other_interruptions": run.other_interruptions + (run.unattributed is not None)}
                for key, run in self.runs.items()
                if run.moments or run.interruptions or run.other_interruptions or run.unattributed is not None}


def by_class(jobs: Sequence[dict]) -> dict:
    """The priority mix's figures over the jobs of one PriorityClass.

    `jobs`: one row per job with `submitted`, `started` and `finished` (None when it did not),
    `duration` (seconds of training it needs), `gpus`, `useful` GPU-seconds (`Holdings`) and
    `preemptions`, `interruptions`, `at_stake` (`Preemptions`).
      - `delay`: submission to all workers first running together (the study's queueing delay),
        over the jobs that started;
      - `waited`: finished − submitted − duration, over the jobs that finished: every second the
        job was not training — the delay, and the time it queued again after each interruption;
      - `victims`: jobs preempted at least once; `preemptions`: the moments they were, summed;
      - `at_stake_gpu_hours`: `Preemptions.at_stake`, summed;
      - `redone_gpu_hours`: Σ over finished jobs of useful GPU-seconds − GPUs × duration: training
        done twice. A model that lost a preempted job's progress would make the job train it again
        and show it here; the emulation's keeps it, so this measures that nothing was lost.
    """
    started = [j for j in jobs if j["started"] is not None]
    finished = [j for j in jobs if j["finished"] is not None]
    delays = [j["started"] - j["submitted"] for j in started]
    waited = [j["finished"] - j["submitted"] - j["duration"] for j in finished]
    return {
        "jobs": len(jobs),
        "not_completed": len(jobs) - len(finished),
        "mean_delay_s": mean(delays) if delays else None,
        "p95_delay_s": percentile(delays, 0.95),
        "mean_waited_s": mean(waited) if waited else None,
        "p95_waited_s": percentile(waited, 0.95),
        "victims": sum(1 for j in jobs if j["preemptions"]),
        "preemptions": sum(j["preemptions"] for j in jobs),
        "interruptions": sum(j["interruptions"] for j in jobs),
        "at_stake_gpu_hours": sum(j["at_stake"] for j in jobs) / 3600,
        "redone_gpu_hours": sum(j["useful"] - j["gpus"] * j["duration"] for j in finished) / 3600,
    }


@dataclass
class _Added:
    gpus: float
    since: float
    jobs: float = 0.0  # GPUs requested by the pods of jobs bound to it now
    placeholders: float = 0.0  # GPUs requested by placeholder pods bound to it now
    gpu_seconds: float = 0.0
    idle: float = 0.0
    placeholder_seconds: float = 0.0

    def accrue(self, now: float) -> None:
        elapsed, self.since = now - self.since, now
        if elapsed <= 0:
            return
        self.gpu_seconds += self.gpus * elapsed
        self.idle += max(self.gpus - self.jobs, 0.0) * elapsed
        self.placeholder_seconds += min(self.placeholders, max(self.gpus - self.jobs, 0.0)) * elapsed


def _gpus(requests: dict) -> float:
    return float(sum(accelerators(requests).values()))


class AddedNodes:
    """The nodes an autoscaler added and how much of their GPUs the jobs used, from what the cluster shows.

    An added node is one of an autoscaled node group (labelled `sim.names.NODE_GROUP_LABEL`; the
    study's groups start empty, so each of their nodes was added by the autoscaler), from its
    creation (it is created Ready when its provisioning time has passed: the time it takes to come
    is not counted) to its deletion, or to the moment of the snapshot. Over that time:
      - `gpu_seconds`: its allocatable GPUs;
      - `idle`: its GPUs that no job's pod requests: not requested by any bound pod that has not
        finished, or requested by a placeholder (a pause pod gangkeeper made to bring the node,
        `gangkeeper.names.CAPACITY_FOR_LABEL`) — a pod being deleted still holds its GPUs;
      - `placeholder_seconds`: the part of `idle` that placeholders requested.
    A job's pod counts whether or not its job runs: GPUs held by a partly placed job are not idle
    here (`Holdings` counts them as partial).
    """

    resources = (NODES, PODS)

    def __init__(self):
        self.live: dict[str, _Added] = {}  # by node name (the autoscaler reuses the names of nodes it deleted)
        self.gone: list[_Added] = []
        self.peak = 0  # the most added nodes standing at once
        self.holding: dict[str, tuple[str, float, bool]] = {}  # pod key → (added node, GPUs, placeholder)

    def observe(self, event: WatchEvent, now: float) -> None:
        obj = event.object
        if event.resource == NODES:
            name = obj["metadata"]["name"]
            if NODE_GROUP_LABEL not in (obj["metadata"].get("labels") or {}):
                return
            if event.type == "DELETED":
                node = self.live.pop(name, None)
                if node is not None:
                    node.accrue(now)
                    self.gone.append(node)
                    self.holding = {key: held for key, held in self.holding.items() if held[0] != name}
            elif name not in self.live:
                allocatable = (obj.get("status") or {}).get("allocatable") or {}
                self.live[name] = _Added(_gpus({k: parse_quantity(v) for k, v in allocatable.items()}), now)
                self.peak = max(self.peak, len(self.live))
            return
        key = f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"
        self._hold(key, None, now)
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        node = spec.get("nodeName")
        if event.type != "DELETED" and node in self.live and status.get("phase") not in ("Succeeded", "Failed"):
            placeholder = CAPACITY_FOR_LABEL in (obj["metadata"].get("labels") or {})
            self._hold(key, (node, _gpus(pod_requests(obj)), placeholder), now)

    def _hold(self, key: str, held: tuple[str, float, bool] | None, now: float) -> None:
        """Take the pod's GPUs off the node it held them on (`held` None), or count them on `held`'s."""
        if held is None:
            held, sign = self.holding.pop(key, None), -1
            if held is None or held[0] not in self.live:
                return
        else:
            self.holding[key], sign = held, 1
        name, gpus, placeholder = held
        node = self.live[name]
        node.accrue(now)
        if placeholder:
            node.placeholders += sign * gpus
        else:
            node.jobs += sign * gpus

    def step(self, now: float) -> bool:
        return False

    def next_due(self) -> float | None:
        return None

    def snapshot(self, now: float) -> dict:
        """Up to `now`: how many nodes were added (`nodes`), the most standing at once (`peak`) and
        standing now (`standing`); GPU-hours of added nodes (`gpu_hours`), of those no job's pod
        requested (`idle_gpu_hours`) and the part of them placeholders requested (`placeholder_gpu_hours`)."""
        for node in self.live.values():
            node.accrue(now)
        every = [*self.gone, *self.live.values()]
        return {"nodes": len(every), "peak": self.peak, "standing": len(self.live),
                "gpu_hours": sum(n.gpu_seconds for n in every) / 3600,
                "idle_gpu_hours": sum(n.idle for n in every) / 3600,
                "placeholder_gpu_hours": sum(n.placeholder_seconds for n in every) / 3600}
