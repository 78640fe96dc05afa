"""`gangkeeper sim serve`: the emulated GPU cluster with gangkeeper installed in it, in one command.

What `kubectl apply -k deploy/default` and then `gangkeeper certs install` do on a cluster is done
here on the emulation, each the way it is done there:

- deploy/default is rendered with `kubectl kustomize`, and every object of a kind the emulation
  serves is created: the `gangkeeper` namespace, both webhook configurations (without caBundle, as
  rendered), the webhook's PodDisruptionBudget, the placeholder pods' PriorityClass. The rest is
  stood in for: the Gang CRD by the Gang kind the emulation serves built in (a served CRD would be
  created like the others), the RBAC objects by the authorizer the server runs on them
  (`sim.rbac.deployed_rbac`, deploy/base's), the service accounts by the tokens of the two
  kubeconfigs, the webhook's Service by the admission chain's route to the webhook's loopback
  port, the two Deployments by the processes below.
- the real `gangkeeper certs install --kubeconfig ADMIN --dir WORK/webhook-tls` (a subprocess)
  issues the webhook's certificate, patches both caBundles and writes the TLS Secret.
- the real `gangkeeper webhook` (gunicorn over TLS, with that certificate) and `gangkeeper
  controller` (as its service account, under deploy/'s RBAC) run as child processes
  (`demo.processes`), each in a process group of its own, their logs in the work directory.
- then the emulated scheduler, kubelet and operators start, and the spec's workloads are submitted.

Everything is written into the work directory (a fresh temporary one unless `--work-dir`), kept
when it stops. SIGINT, SIGTERM and SIGHUP stop the processes (SIGTERM, SIGKILL after 10 s), the
cluster and the server, and it exits 0; a child that exits by itself stops everything, naming its
log, and it exits 1. `--bare` serves the cluster alone (no namespace, no webhook, no controller).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import ipaddress
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gangkeeper import names
from gangkeeper.cli import CommandError, check_can_listen, listen_problem
from gangkeeper.config import log_config

log = logging.getLogger("gangkeeper.sim")

LOOPBACK = "127.0.0.1"
EXAMPLE = Path(__file__).resolve().parent / "examples" / "training-job.yaml"
EXAMPLE_NAMESPACE = "ml-training"
WEBHOOK_SERVICE = f"{names.WEBHOOK_SERVICE}.{names.DEFAULT_NAMESPACE}.svc"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_WHAT = "the emulated API server"
_PORT_FLAG, _PORT_ENV = "--port", "GANGKEEPER_SIM_PORT"
# deploy/'s kinds the emulation does not serve, and what stands in for each.
STOOD_IN_FOR = {
    "CustomResourceDefinition": "the Gang kind, served built in",
    "ClusterRole": "the server's RBAC authorizer (deploy/base)",
    "ClusterRoleBinding": "the server's RBAC authorizer (deploy/base)",
    "Role": "the server's RBAC authorizer (deploy/base)",
    "RoleBinding": "the server's RBAC authorizer (deploy/base)",
    "ServiceAccount": "the kubeconfigs' tokens",
    "Service": f"the admission route {WEBHOOK_SERVICE}:443 → the webhook process",
    "Deployment": "the webhook and controller processes",
}


class Interrupted(Exception):
    """A stop signal arrived while the playground was starting."""


@dataclass
class Started:
    """What runs: the server's URL, the admin's kubeconfig, the API, the cluster's runner, the children."""

    server_url: str
    kubeconfig: Path
    api: object
    runner: object
    processes: list = field(default_factory=list)


def serve(args: argparse.Namespace) -> int:
    """`gangkeeper sim serve`: start, print what to try, supervise until a stop signal; the exit code.
    A failure the user can fix is one line on stderr and exit code 1 (here too, not only in
    `gangkeeper.cli.main`: under `python -m gangkeeper.cli` that module's CommandError is another class)."""
    try:
        return _serve(args)
    except CommandError as error:
        print(f"gangkeeper sim serve: {error}", file=sys.stderr, flush=True)
        return 1


def _serve(args: argparse.Namespace) -> int:
    check_can_listen(LOOPBACK, args.port, _WHAT, _PORT_FLAG, _PORT_ENV)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    log_config("sim", args)
    spec = _spec(args)
    if spec is None:
        return 2
    work = work_directory(args.work_dir)
    stopping, state = threading.Event(), {"starting": True}

    def on_signal(signum, frame):
        stopping.set()
        if state["starting"]:
            raise Interrupted(signal.Signals(signum).name)

    previous = {signum: signal.signal(signum, on_signal) for signum in STOP_SIGNALS}
    try:
        with contextlib.ExitStack() as running:
            try:
                started = (start_bare if args.bare else start_playground)(args, spec, work, running)
            finally:
                state["starting"] = False
            print(banner(args, started, work), flush=True)
            code = supervise(started, stopping)
            log.info("stopping: %s", "a stop signal" if code == 0 else "a component stopped")
            return code
    except Interrupted as signalled:
        print(f"gangkeeper sim serve: stopped by {signalled} while starting (work dir {work})", file=sys.stderr)
        return 130
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def work_directory(requested: str) -> Path:
    """`requested` (created when missing), else a fresh temporary directory."""
    if not requested:
        return Path(tempfile.mkdtemp(prefix="gangkeeper-playground-"))
    directory = Path(requested).expanduser().resolve()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise CommandError(f"cannot use {directory} as the work directory ({error.strerror}); "
                           f"choose another with --work-dir") from None
    return directory


def _spec(args: argparse.Namespace) -> dict | None:
    """The spec of --spec, else of --nodes and --gpus-per-node, with the node groups of --node-group added."""
    from sim.spec import SpecError, check, parse

    try:
        document = parse(Path(args.spec).read_text()) if args.spec else {
            "nodes": [{"count": args.nodes, "gpusPerNode": args.gpus_per_node}] if args.nodes else []}
        if args.node_group and isinstance(document, dict):
            document = {**document, "nodeGroups": [*(document.get("nodeGroups") or []), *args.node_group]}
        return check(document)
    except (OSError, SpecError) as error:
        log.error("cannot use the spec %s: %s", args.spec or "(from flags)", error)
        return None


def _served(args: argparse.Namespace, work: Path, running: contextlib.ExitStack, *, tls: bool,
            webhook_services: dict, authorizer):
    """The API server on 127.0.0.1:PORT (HTTPS with a fresh CA when `tls`) and its two kubeconfigs."""
    from sim.api import ADMIN, CONTROLLER
    from sim.apiserver import APIServer
    from sim.clock import RealClock
    from sim.kubeconfig import write_kubeconfig
    from sim.server import RunningServer

    clock = RealClock()
    api = APIServer(native_pod_groups=args.native_pod_groups, webhook_services=webhook_services, clock=clock.now)
    admin_token, controller_token = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    certificates = issue_apiserver_tls(work / "apiserver-tls") if tls else {}
    try:
        server = RunningServer(api, port=args.port, tokens={admin_token: ADMIN, controller_token: CONTROLLER},
                               authorizer=authorizer, **certificates)
    except OSError as error:  # taken since the check
        raise listen_problem(error, f"{LOOPBACK}:{args.port}", _WHAT, _PORT_FLAG, _PORT_ENV) from None
    running.callback(server.stop)
    kubeconfig = Path(args.kubeconfig_out).resolve() if args.kubeconfig_out else work / "kubeconfig"
    ca_file = str(work / "apiserver-tls" / "ca.crt") if tls else None
    write_kubeconfig(kubeconfig, server.url, admin_token, ca_file)
    write_kubeconfig(f"{kubeconfig}.controller", server.url, controller_token, ca_file)
    return api, clock, server, kubeconfig


def _start_cluster(args: argparse.Namespace, api, clock, spec: dict, running: contextlib.ExitStack):
    from sim.cluster import ThreadRunner, emulated_cluster

    runner = ThreadRunner(emulated_cluster(api, clock, spec=spec, run_seconds=args.run_seconds)).start()
    running.callback(runner.stop)
    return runner


def start_bare(args: argparse.Namespace, spec: dict, work: Path, running: contextlib.ExitStack) -> Started:
    """The cluster alone: no namespace, no webhook configurations, no gangkeeper processes."""
    from sim.rbac import DEPLOY_BASE, deployed_rbac

    try:
        authorizer = deployed_rbac()
    except (OSError, ValueError) as error:  # an install without the checkout's deploy/ (the image)
        log.warning("no RBAC from %s (%s): every authenticated request is allowed", DEPLOY_BASE, error)
        authorizer = None
    api, clock, server, kubeconfig = _served(args, work, running, tls=args.tls,
                                             webhook_services=dict(args.webhook_route), authorizer=authorizer)
    return Started(server.url, kubeconfig, api, _start_cluster(args, api, clock, spec, running))


def start_playground(args: argparse.Namespace, spec: dict, work: Path, running: contextlib.ExitStack) -> Started:
    """The cluster with gangkeeper installed in it as deploy/ installs it (see the module docstring)."""
    from demo.processes import ControllerProcess, WebhookCerts, WebhookProcess, free_port, stop_all
    from sim.rbac import deployed_rbac

    manifests = rendered_deploy_default()
    try:
        authorizer = deployed_rbac()
    except (OSError, ValueError) as error:
        raise CommandError(f"cannot read deploy/'s RBAC ({error}); run from a checkout, or use --bare") from None
    webhook_port = free_port()
    routes = {**dict(args.webhook_route), f"{WEBHOOK_SERVICE}:443": f"{LOOPBACK}:{webhook_port}"}
    api, clock, server, kubeconfig = _served(args, work, running, tls=True, webhook_services=routes,
                                             authorizer=authorizer)
    install(api, manifests)

    class Webhook(WebhookProcess):
        process_group = 0  # a Ctrl-C reaches the playground only; it stops the children itself

    class Controller(ControllerProcess):
        process_group = 0

    children: list = []
    running.callback(stop_all, children)
    children.append(Controller(Path(f"{kubeconfig}.controller"), work, namespace=None))  # starts while certs install runs
    ca_pem = certs_install(kubeconfig, work / "webhook-tls", work / "certs-install.log")
    children.insert(0, Webhook(WebhookCerts(work / "webhook-tls", ca_pem), work, port=webhook_port))
    webhook, controller = children
    webhook.wait_ready(server_hostname=WEBHOOK_SERVICE)
    controller.wait_ready()
    log.info("webhook ready on %s:%d (pid %d), controller ready (pid %d)", LOOPBACK, webhook_port,
             webhook.popen.pid, controller.popen.pid)
    return Started(server.url, kubeconfig, api, _start_cluster(args, api, clock, spec, running), children)


def rendered_deploy_default() -> list[dict]:
    """`kubectl kustomize deploy/default`: what `kubectl apply -k deploy/default` would create."""
    from demo.stack import kubectl
    from sim.deployed import REPOSITORY

    try:
        rendered = subprocess.run([kubectl(), "kustomize", str(REPOSITORY / "deploy" / "default")], check=True,
                                  capture_output=True, text=True, timeout=60).stdout
    except RuntimeError as error:  # no kubectl
        raise CommandError(str(error)) from None
    except subprocess.CalledProcessError as error:
        raise CommandError(f"kubectl kustomize deploy/default failed: {' '.join(error.stderr.split())}") from None
    return [document for document in yaml.safe_load_all(rendered) if document]


def install(api, manifests: list[dict]) -> list[str]:
    """Create every object of a kind the emulation serves, in the rendered order (namespaces first),
    as kubernetes-admin; say what stands in for the others."""
    created, stood_in = [], {}
    for document in manifests:
        kind = api.kinds.by_kind(document.get("apiVersion", ""), document.get("kind", ""))
        described = f"{document['kind']} {document['metadata']['name']}"
        if kind is None:
            stood_in.setdefault(STOOD_IN_FOR.get(document["kind"], "nothing (not served)"), []).append(described)
            continue
        api.create(api.resource_name(kind), document)
        created.append(described)
    log.info("installed from deploy/default: %s", ", ".join(created))
    for stand_in, described in stood_in.items():
        log.info("not served, stood in for: %s (by %s)", ", ".join(described), stand_in)
    return created


def certs_install(kubeconfig: Path, directory: Path, log_path: Path) -> bytes:
    """The real `gangkeeper certs install` against the emulation; the CA it installed."""
    command = [sys.executable, "-m", "gangkeeper.cli", "certs", "install", "--kubeconfig", str(kubeconfig),
               "--dir", str(directory)]
    environment = {key: value for key, value in os.environ.items() if not key.startswith("GANGKEEPER_CERTS_")}
    result = subprocess.run(command, cwd=directory.parent, capture_output=True, text=True, timeout=60,
                            env=environment)
    log_path.write_text(f"$ {' '.join(command)}\n{result.stdout}{result.stderr}")
    if result.returncode != 0:
        last = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        raise CommandError(f"gangkeeper certs install failed (exit {result.returncode}, log {log_path}): {last[0]}")
    for line in result.stdout.splitlines():
        log.info("certs install: %s", line)
    return (directory / "ca.crt").read_bytes()


def issue_apiserver_tls(directory: Path) -> dict:
    """A CA and a serving certificate for 127.0.0.1 and localhost, written to `directory`."""
    from gangkeeper.certs.files import write_certs
    from gangkeeper.certs.issue import issue

    issued = issue("sim-apiserver", "default", datetime.datetime.now(datetime.timezone.utc), 30,
                   dns_names=("localhost",), ips=(ipaddress.ip_address(LOOPBACK),))
    write_certs(directory, issued)
    return {"certfile": str(directory / "tls.crt"), "keyfile": str(directory / "tls.key")}


def supervise(started: Started, stopping: threading.Event) -> int:
    """Wait for a stop signal (0), or until a child or the cluster stops by itself (1, said why)."""
    while not stopping.wait(0.5):
        for process in started.processes:
            if not process.alive():
                print(f"gangkeeper sim serve: the {process.name} exited with code {process.popen.returncode} "
                      f"(log {process.log_path}); stopping everything", file=sys.stderr, flush=True)
                return 1
        if started.runner.error is not None:
            print(f"gangkeeper sim serve: the emulated cluster stopped ({started.runner.error!r}); stopping "
                  f"everything", file=sys.stderr, flush=True)
            return 1
    return 0


def shown(path: Path) -> str:
    """A path as a user types it: relative to the current directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def kubectl_command() -> str:
    """The venv's kubectl (the version the emulation is tested with), `kubectl` when that is what PATH finds."""
    from demo.stack import kubectl

    found = Path(kubectl())
    on_path = shutil.which("kubectl")
    return "kubectl" if on_path and Path(on_path).resolve() == found.resolve() else shown(found)


def node_groups(cluster) -> list:
    """The node groups of the cluster's autoscaler, if it has one."""
    from sim.autoscaler import Autoscaler

    return [group for component in cluster.components if isinstance(component, Autoscaler)
            for group in component.groups.values()]


def banner(args: argparse.Namespace, started: Started, work: Path) -> str:
    """What is running, where its files are, and what to try; the first line as before the playground."""
    from sim.names import GPU

    nodes = started.api.list("nodes")
    gpus = sum(int((node.get("status") or {}).get("allocatable", {}).get(GPU, 0) or 0) for node in nodes)
    kubectl = f"{kubectl_command()} --kubeconfig {started.kubeconfig}"
    lines = [f"emulated cluster at {started.server_url}: {len(nodes)} nodes, {gpus} GPUs" +
             ("" if args.bare else ", gangkeeper installed (namespace, webhook configurations, RBAC, Gang kind)")]
    for group in node_groups(started.runner.cluster):
        per_node = (group.template.get("status") or {}).get("allocatable", {}).get(GPU, "0")
        lines.append(f"  node group {group.name}: {group.min_size} to {group.max_size} nodes of {per_node} GPUs, "
                     f"each Ready {group.provisioning_seconds:g} s after its scale-up (emulated cluster-autoscaler)")
    for process in started.processes:
        detail = (f"https://{process.address}" if hasattr(process, "address")
                  else f"metrics http://{LOOPBACK}:{process.metrics_port}/metrics")
        lines.append(f"  {process.name:<10}  pid {process.popen.pid}, {detail}, log {process.log_path}")
    lines += [f"work dir:   {work} (TLS files, kubeconfigs, logs; kept when it stops)",
              f"kubeconfig: {started.kubeconfig}",
              "try:"]
    if args.bare:
        lines += [f"  {kubectl} get nodes,pods -A",
                  f"  gangkeeper controller --kubeconfig {started.kubeconfig}.controller"]
    else:
        lines += [f"  {kubectl} get nodes",
                  f"  {kubectl} apply -f {shown(EXAMPLE)}",
                  f"  {kubectl} get gangs,pods -n {EXAMPLE_NAMESPACE}"]
    lines.append("Ctrl-C stops it.")
    return "\n".join(lines)
