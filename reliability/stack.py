"""The whole stack the reliability runs use: the emulated API server and cluster (live, on the wall
clock), gangkeeper's webhook (the real gunicorn process over TLS, or its app in process) and real
`gangkeeper controller` processes talking to the API over HTTP, each through a front end whose
faults can be switched on, as the controller's service account under deploy/'s RBAC."""

from __future__ import annotations

import http.client
import os
import signal
import sys
import time
from pathlib import Path

from demo.processes import LOOPBACK, Process, WebhookProcess, free_port, issue_loopback_certs, stop_all
from demo.stack import (
    WEBHOOK_SERVICE,
    WebhookApp,
    check_granted,
    rendered_webhook_configurations,
    serve,
)
from gangkeeper import names
from sim.apiserver import APIServer
from sim.clock import RealClock
from sim.cluster import Cluster, ThreadRunner, emulated_cluster
from sim.deployed import REPOSITORY, install_webhook_configurations
from sim.faults import Faults
from sim.rbac import deployed_rbac
from sim.server import RunningServer

NAMESPACE = "ml-training"


def rss_mib(pid: int) -> float | None:
    """Resident set size of a process from /proc, in MiB (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def children(pid: int) -> list[int]:
    """The direct children of a process (gunicorn's workers under its master)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                found.append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    return sorted(found)


class ControllerProcess(Process):
    """`gangkeeper controller` with the flags a reliability run sets (identity, bind timeout, resync)."""

    def __init__(self, kubeconfig: Path, workdir: Path, name: str, *, identity: str, bind_timeout: int,
                 resync_seconds: int = 2, namespace: str = NAMESPACE):
        self.health_port, self.metrics_port = free_port(), free_port()
        self.identity = identity
        self.audit_path = workdir / f"{name}-audit.jsonl"
        self.kubeconfig, self.workdir = kubeconfig, workdir
        super().__init__(name, [
            sys.executable, "-m", "gangkeeper.cli", "controller", "--kubeconfig", str(kubeconfig),
            "--namespace", namespace, "--health-port", str(self.health_port),
            "--metrics-port", str(self.metrics_port), "--audit-file", str(self.audit_path),
            "--identity", identity, "--bind-timeout-seconds", str(bind_timeout),
            "--resync-seconds", str(resync_seconds),
        ], workdir / f"{name}.log")

    def wait_ready(self, timeout: float = 60.0) -> None:
        self.wait_until_ready(lambda: http.client.HTTPConnection(LOOPBACK, self.health_port, timeout=1), timeout)

    def kill(self) -> None:
        """SIGKILL, as the OOM killer or a node loss does it: no Lease handed back, nothing flushed."""
        self.popen.send_signal(signal.SIGKILL)
        self.popen.wait()

    def restart(self) -> None:
        """A new process with the same command (the kubelet restarting the container)."""
        with open(self.log_path, "ab") as log:
            import subprocess
            self.popen = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=log,
                                          stderr=subprocess.STDOUT, cwd=REPOSITORY)


class Stack:
    """API server + live cluster + webhook; controllers are added with `controller()`."""

    def __init__(self, workdir: Path, *, real_webhook: bool, webhook_workers: int = 2):
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.webhook: WebhookProcess | None = None
        self.controllers: list[ControllerProcess] = []
        self.servers: list[RunningServer] = []
        self.rbac = deployed_rbac()
        if real_webhook:
            certs = issue_loopback_certs(workdir / "webhook-tls")
            self.webhook = WebhookProcess(certs, workdir, workers=webhook_workers)
            self.webhook.wait_ready()
            self.api = APIServer(webhook_services={WEBHOOK_SERVICE: self.webhook.address})
            for resource, configuration in rendered_webhook_configurations(certs.ca_pem):
                self.api.create(resource, configuration)
        else:
            self.api = APIServer(webhook_services={WEBHOOK_SERVICE: WebhookApp(workdir / "webhook-audit.jsonl")})
            install_webhook_configurations(self.api)
        for name, labels in ((names.DEFAULT_NAMESPACE, {}), (NAMESPACE, {names.ENFORCE_LABEL: names.ENFORCE_VALUE})):
            self.api.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": name, "labels": labels}})
        self.cluster: Cluster | None = None
        self.runner: ThreadRunner | None = None

    def start_cluster(self, spec: dict, start_delay: float = 0.2) -> None:
        """Scheduler, kubelets and operators on a thread; the spec's nodes now, its workloads on schedule."""
        self.cluster = emulated_cluster(self.api, RealClock(), spec=spec, start_delay=start_delay)
        self.runner = ThreadRunner(self.cluster, idle_wait=0.05).start()

    def front_end(self, faults: Faults | None = None) -> tuple[Path, RunningServer]:
        """An HTTP front end for one controller, as its service account, and its kubeconfig."""
        served = serve(self.api, self.workdir, name=f"front-end-{len(self.servers) + 1}", faults=faults,
                       authorizer=self.rbac)
        self.servers.append(served.server)
        return served.controller_kubeconfig, served.server

    def controller(self, name: str, *, identity: str, bind_timeout: int, faults: Faults | None = None,
                   resync_seconds: int = 2) -> ControllerProcess:
        kubeconfig, _ = self.front_end(faults)
        process = ControllerProcess(kubeconfig, self.workdir, name, identity=identity, bind_timeout=bind_timeout,
                                    resync_seconds=resync_seconds)
        self.controllers.append(process)
        return process

    def close(self) -> None:
        """Stop everything; then raise if deploy/'s RBAC refused a controller anything (a run that
        needed more than the manifests grant says nothing about a real cluster)."""
        stop_all([*self.controllers, *([self.webhook] if self.webhook is not None else [])])
        if self.runner is not None:
            self.runner.stop()
            self.cluster.close()
        for server in self.servers:
            server.stop()
        check_granted(self.servers)


def member(name: str, group: str, size: int, *, namespace: str = NAMESPACE, gpus: int = 1,
           annotations: dict[str, str] | None = None) -> dict:
    """A plain pod in an explicit group of `size` (docs/how-it-works.md, "How group identity is derived", rule 1:
    the group label and the min count), one container asking for `gpus` GPUs, a CPU and 4 GiB per GPU."""
    resources = {"cpu": str(gpus), "memory": f"{4 * gpus}Gi", "nvidia.com/gpu": str(gpus)}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {names.GROUP_LABEL: group},
                         "annotations": {names.MIN_COUNT_ANNOTATION: str(size), **(annotations or {})}},
            "spec": {"restartPolicy": "Never",
                     "containers": [{"name": "trainer", "image": "registry.example/train:latest",
                                     "resources": {"requests": resources, "limits": dict(resources)}}]}}


def gated(pod: dict) -> bool:
    """Whether the pod still carries gangkeeper's scheduling gate."""
    return any(g.get("name") == names.SCHEDULING_GATE for g in pod["spec"].get("schedulingGates") or ())


def percentile(values: list[float], q: float) -> float:
    """The value at rank q/100 of the sorted values (the nearest one); NaN for none."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def wait_for(condition, timeout: float, what: str, poll: float = 0.1):
    """Poll `condition` until it is true; a deadline, not a timed assertion."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(poll)
    raise TimeoutError(f"{what} not reached within {timeout:g} s")
