"""The demo's two phases on the emulated cluster, and what each one proved.

Time: the emulated cluster runs on a `ScaledClock`, `speed` times faster than the wall clock,
so that two 32-pod jobs of a few minutes each play out in well under two minutes. Every time
the demo prints is cluster time. The real webhook and controller run on the wall clock; for
them the cluster simply moves fast.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from demo.observe import Observer, Snapshot
from demo.processes import ControllerProcess, WebhookProcess, issue_loopback_certs, stop_all
from demo.stack import api_with_webhook, serve
from gangkeeper import names
from sim import spec as sim_spec
from sim.api import ADMIN, CONTROLLER, APIError, User, WatchEvent
from sim.apiserver import APIServer
from sim.cluster import Cluster, ThreadRunner, emulated_cluster
from sim.names import PODS
from sim.reservations import GANGS

NAMESPACE = "ml-training"
TICK = 0.25  # wall seconds between two looks at the cluster


@dataclass(frozen=True)
class Settings:
    nodes: int = 6
    gpus_per_node: int = 8
    workers_per_job: int = 32
    jobs: int = 2
    phase1_seconds: float = 30.0
    train_seconds: float = 45.0
    speed: float = 3.0
    namespace: str = NAMESPACE

    @property
    def capacity(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def job_names(self) -> list[str]:
        return [f"train-{chr(ord('a') + i)}" for i in range(self.jobs)]

    def spec(self) -> dict:
        """The scenario as a `sim.spec` document, checked by its loader."""
        document = {
            "nodes": [{"count": self.nodes, "gpusPerNode": self.gpus_per_node, "namePrefix": "gpu-node"}],
            "workloads": [{"kind": "PyTorchJob", "name": name, "namespace": self.namespace,
                           "size": self.workers_per_job, "gpusPerPod": 1, "durationSeconds": self.train_seconds}
                          for name in self.job_names],
        }
        return sim_spec.load(yaml.safe_dump(document))


# --- running the emulated cluster ------------------------------------------------------------

class ScaledClock:
    """Cluster time: epoch seconds that pass `speed` times faster than the wall clock."""

    def __init__(self, speed: float):
        self.speed = speed
        self.origin = time.time()
        self._wall = time.monotonic()

    def now(self) -> float:
        return self.origin + (time.monotonic() - self._wall) * self.speed


def start_cluster(cluster: Cluster, clock: ScaledClock) -> ThreadRunner:
    """The cluster settling on its own thread, at the pace of cluster time."""
    return ThreadRunner(cluster, idle_wait=0.2, speed=clock.speed).start()


def stop_cluster(runner: ThreadRunner) -> None:
    runner.stop(timeout=10)
    runner.cluster.close()


class PodFeed:
    """A cluster component that hands every pod and Gang event to the observer, on the cluster's thread."""

    resources = (PODS, GANGS)

    def __init__(self, observer: Observer):
        self.observer = observer

    def observe(self, event: WatchEvent, now: float) -> None:
        if event.resource == GANGS:
            self.observer.observe_gang(event.object, event.type == "DELETED", now)
        else:
            self.observer.observe(event.object, event.type == "DELETED", now)

    def step(self, now: float) -> bool:
        return False

    def next_due(self) -> float | None:
        return None


# --- results ---------------------------------------------------------------------------------

@dataclass
class PhaseResult:
    title: str
    final: Snapshot
    timeline: list[tuple[float, tuple[int, ...]]]
    job_names: list[str]
    verdict: str = ""
    checks: list[tuple[str, bool]] = field(default_factory=list)  # (claim, held)
    notes: list[str] = field(default_factory=list)
    controller_ran: bool = False
    tone: str = "green"  # how the terminal frames the verdict: red for the problem shown, yellow for partial

    @property
    def passed(self) -> bool:
        return all(ok for _, ok in self.checks)


def watch(view, observer: Observer, clock, runner: ThreadRunner, until, *, limit: float,
          alive=lambda: None) -> Snapshot:
    """Show the cluster until `until(snapshot)` holds or `limit` cluster seconds have passed."""
    while True:
        runner.check()
        alive()
        snapshot = observer.snapshot(clock.now())
        view.tick(snapshot)
        if until(snapshot) or snapshot.at >= limit:
            return snapshot
        time.sleep(TICK)


# --- phase 1: the stock scheduler ------------------------------------------------------------

def phase1(settings: Settings, view) -> PhaseResult:
    """Both jobs on the default scheduler alone, for `phase1_seconds` of cluster time."""
    title = "Phase 1 · stock kube-scheduler"
    view.begin(title, [
        (f"{settings.nodes} nodes × {settings.gpus_per_node} GPUs = {settings.capacity} GPUs; "
         f"{settings.jobs} PyTorchJobs × {settings.workers_per_job} pods × 1 GPU submitted at once."),
        "The scheduler places pods one at a time; a job trains only when all its pods run.",
        f"Watching for {settings.phase1_seconds:g} s of cluster time (×{settings.speed:g} speed).",
    ])
    clock = ScaledClock(settings.speed)
    api = APIServer(clock=clock.now)
    api.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": settings.namespace}})
    observer = Observer({n: settings.workers_per_job for n in settings.job_names}, settings.capacity, clock.now())
    cluster = emulated_cluster(api, clock, spec=settings.spec(), extra=[PodFeed(observer)])
    runner = start_cluster(cluster, clock)
    try:
        final = watch(view, observer, clock, runner, lambda s: False, limit=settings.phase1_seconds)
    finally:
        stop_cluster(runner)
    result = PhaseResult(title, final, observer.timeline, settings.job_names)
    started = [j for j in final.jobs if j.started is not None]
    deadlocked = not started and final.held_gpus == settings.capacity and all(j.pending for j in final.jobs)
    result.checks = [
        (f"all {settings.capacity} GPUs held", final.held_gpus == settings.capacity),
        ("no job has all its pods running", not started),
    ]
    result.tone = "red"
    if deadlocked:
        parts = ", ".join(f"{j.name} {j.running}/{j.size} running" for j in final.jobs)
        result.verdict = (f"DEADLOCKED after {final.at:.0f} s of cluster time: {parts}; all {final.held_gpus} GPUs "
                          "held, no job can start, and none ever will until someone deletes a job.")
    else:
        result.verdict = (f"after {final.at:.0f} s: {final.held_gpus}/{settings.capacity} GPUs held, "
                          f"{len(started)} job(s) started — no deadlock with these sizes.")
    view.end(result)
    return result


# --- phase 2: gangkeeper ---------------------------------------------------------------------

def try_to_remove_gate(api: APIServer, namespace: str, user: User) -> tuple[str, str | None]:
    """`user` removes our gate from a gated pod: (the pod, the refusal, or None if it was allowed).

    The patch tests that the gate is still there, so a pod the controller releases meanwhile
    fails the test (422) rather than counting as allowed; the next gated pod is tried then."""
    for pod in api.list(PODS, namespace=namespace):
        gates = [g.get("name") for g in pod["spec"].get("schedulingGates") or ()]
        if names.SCHEDULING_GATE not in gates:
            continue
        index = gates.index(names.SCHEDULING_GATE)
        patch = [{"op": "test", "path": f"/spec/schedulingGates/{index}/name", "value": names.SCHEDULING_GATE},
                 {"op": "remove", "path": f"/spec/schedulingGates/{index}"}]
        try:
            api.patch(PODS, pod["metadata"]["name"], patch, namespace=namespace,
                      patch_type="application/json-patch+json", user=user)
        except APIError as refusal:
            if refusal.code in (404, 409, 422):
                continue  # released or gone meanwhile
            return pod["metadata"]["name"], f"HTTP {refusal.code}: {refusal}"
        return pod["metadata"]["name"], None
    return "", None


def phase2(settings: Settings, view, workdir: Path, *, use_controller: bool = True) -> PhaseResult:
    """The same jobs with the real webhook, and the real controller when this checkout has it.

    Everything is up before the jobs are submitted, as on a cluster where gangkeeper is installed:
    waits are counted from submission, not from process start."""
    title = "Phase 2 · with gangkeeper"
    controller = use_controller
    total = settings.jobs * settings.workers_per_job
    view.begin(title, [
        "The same cluster and jobs; namespace labelled gangkeeper.io/enforce=true.",
        "Real webhook: gunicorn over TLS (certs.issue), registered from the rendered deploy/default manifests.",
        "Real controller: `gangkeeper controller` talking to the emulated API over HTTP." if controller else
        "Controller: NOT AVAILABLE in this checkout (no controller.cli) — the demo stops after admission.",
    ])
    with ExitStack() as stack:
        certs = issue_loopback_certs(workdir / "webhook-tls")
        webhook = WebhookProcess(certs, workdir)
        stack.callback(webhook.stop)
        webhook.wait_ready()
        view.say(f"webhook ready on https://{webhook.address} (log {webhook.log_path}, audit {webhook.audit_path})")

        clock = ScaledClock(settings.speed)
        api = api_with_webhook(webhook.address, certs.ca_pem, clock=clock.now)
        api.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": settings.namespace,
                                               "labels": {names.ENFORCE_LABEL: names.ENFORCE_VALUE}}})
        server = serve(api, workdir)
        stack.callback(server.stop)
        processes = [webhook]  # stopped together, before the API front end the controller talks to
        stack.callback(stop_all, processes)
        if controller:
            process = ControllerProcess(server.controller_kubeconfig, workdir, namespace=settings.namespace)
            processes.append(process)
            process.wait_ready()
            view.say(f"controller ready, talking to {server.url} as {CONTROLLER.username} "
                     f"(log {process.log_path}, audit {process.audit_path})")

        observer = Observer({n: settings.workers_per_job for n in settings.job_names}, settings.capacity, clock.now())
        cluster = emulated_cluster(api, clock, spec=settings.spec(), extra=[PodFeed(observer)])
        runner = start_cluster(cluster, clock)
        stack.callback(stop_cluster, runner)
        alive = process.check_running if controller else (lambda: None)
        admitted = watch(view, observer, clock, runner, lambda s: sum(j.created for j in s.jobs) >= total,
                         limit=120.0 * settings.speed, alive=alive)
        seen, gated, labelled = observer.creation_counts()
        view.say(f"admission: {seen}/{total} pods created, {gated} of them with the gate {names.SCHEDULING_GATE} and "
                 f"{labelled} with the label {names.GROUP_LABEL}, both set by the webhook")
        pod, refusal = try_to_remove_gate(api, settings.namespace, ADMIN)
        if pod:
            view.say(f"{ADMIN.username} removes the gate of {pod}: " +
                     (f"DENIED — {refusal}" if refusal else "ALLOWED (this is a bug)"))
        else:
            view.say("no pod was still gated to try removing the gate on (the controller released them all)")
        checks = [(f"all {total} pods created with the gate, by the webhook", seen == total and gated == total),
                  (f"all {total} pods labelled with their group by the webhook", labelled == total)]
        if pod:
            checks.append((f"gate removal by {ADMIN.username} denied by the webhook", refusal is not None))

        if controller:
            limit = admitted.at + settings.jobs * (settings.train_seconds + 60.0)
            final = watch(view, observer, clock, runner, lambda s: all(j.finished is not None for j in s.jobs),
                          limit=limit, alive=alive)
            finished = [j for j in final.jobs if j.finished is not None]
            stranded = sum(j.stranded_gpu_seconds for j in final.jobs)
            refused = server.server.refused()
            for decision in refused:
                view.say(f"deploy/'s RBAC REFUSED {decision.username}: {decision.verb} {decision.target}")
            checks += [("every job completed", len(finished) == len(final.jobs)),
                       ("no GPU held by a job while any of its pods had no node", stranded == 0),
                       ("every request of the controller granted by deploy/'s RBAC", not refused)]
            verdict = (f"all {len(final.jobs)} jobs completed in {final.at:.0f} s of cluster time, each placed whole; "
                       f"GPU-seconds held while a pod had no node: {stranded:.0f}."
                       if len(finished) == len(final.jobs) else
                       f"only {len(finished)}/{len(final.jobs)} jobs completed within {limit:.0f} s of cluster time.")
        else:
            final = watch(view, observer, clock, runner, lambda s: False,
                          limit=admitted.at + min(settings.phase1_seconds, 10.0))
            checks.append(("no GPU held", final.held_gpus == 0))
            verdict = ("every pod is gated and labelled by the real webhook and no GPU is held; the controller, which "
                       "would reserve capacity for a whole job and release it, is NOT AVAILABLE in this checkout "
                       "(controller.cli missing), so the jobs stay gated. Nothing here fakes its work.")
        runner.check()
    result = PhaseResult(title, final, observer.timeline, settings.job_names, verdict, checks,
                         controller_ran=controller, tone="green" if controller else "yellow")
    view.end(result)
    return result
