"""`gangkeeper sim serve`: an emulated GPU cluster in one process, for kubectl, the controller and you.

The API server (sim/apiserver.py over sim/server.py) is served on 127.0.0.1, in real time, with
the emulated kube-scheduler, kubelet and workload operators running against it. Two kubeconfigs
are written: one for `kubernetes-admin` (yours, and kubectl's) and one authenticating as the
controller's service account, so that a real `gangkeeper controller --kubeconfig` is the only
client the webhook lets remove gates. Requests are authorized by the RBAC objects of this
checkout's deploy/base, as on a cluster where gangkeeper is installed: the controller may do what
its manifests grant and nothing else (an install without deploy/ serves without authorization,
and says so). Stop it with Ctrl-C.
"""

import argparse
import datetime
import ipaddress
import logging
import secrets
import signal
import threading
from pathlib import Path

from gangkeeper import names
from gangkeeper.config import add_bool_flag, add_flag, int_in_range, log_config, port

log = logging.getLogger("gangkeeper.sim")



def _route(text: str) -> tuple[str, str]:
    """`SERVICE.NAMESPACE.svc:PORT=HOST:PORT` → the pair the admission chain routes by."""
    service, separator, target = text.partition("=")
    if not separator or ".svc" not in service or ":" not in target:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a webhook route; write SERVICE.NAMESPACE.svc:PORT=HOST:PORT, "
            f"e.g. {names.WEBHOOK_SERVICE}.{names.DEFAULT_NAMESPACE}.svc:443=127.0.0.1:9443")
    return service, target


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("sim", help="run the emulated GPU cluster (API server, scheduler, kubelet)",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="sim_command", metavar="COMMAND", required=True)
    serve = commands.add_parser("serve", help="serve the emulated cluster until interrupted", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flag(serve, "--spec", default="", env="GANGKEEPER_SIM_SPEC",
             help="YAML file of nodes and workloads (sim/spec.py); overrides --nodes/--gpus-per-node")
    add_flag(serve, "--nodes", default=6, type=int_in_range(0, 10_000, "a node count"), env="GANGKEEPER_SIM_NODES",
             help="GPU nodes, when no --spec is given")
    add_flag(serve, "--gpus-per-node", default=8, type=int_in_range(0, 64, "a GPU count"),
             env="GANGKEEPER_SIM_GPUS_PER_NODE", help="GPUs per node, when no --spec is given")
    add_flag(serve, "--port", default=6443, type=port, env="GANGKEEPER_SIM_PORT", help="port on 127.0.0.1")
    add_bool_flag(serve, "--tls", env="GANGKEEPER_SIM_TLS",
                  help="serve HTTPS with a fresh CA (kubectl sends tokens only over HTTPS)")
    add_flag(serve, "--kubeconfig-out", default="sim.kubeconfig", env="GANGKEEPER_SIM_KUBECONFIG_OUT",
             help="kubeconfig for kubernetes-admin; FILE.controller is written for the controller's identity")
    add_bool_flag(serve, "--native-pod-groups", env="GANGKEEPER_SIM_NATIVE_POD_GROUPS",
                  help="serve scheduling.k8s.io/v1beta1 PodGroups, as a 1.37 cluster with the gate on")
    serve.add_argument("--webhook-route", action="append", type=_route, default=[], metavar="ROUTE",
                       help="SERVICE.NAMESPACE.svc:PORT=HOST:PORT: where a service-referenced webhook "
                            "really listens (repeatable)")
    serve.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    log_config("sim", args)
    from sim.api import ADMIN, CONTROLLER
    from sim.apiserver import APIServer
    from sim.clock import RealClock
    from sim.cluster import ThreadRunner, emulated_cluster
    from sim.kubeconfig import write_kubeconfig
    from sim.rbac import DEPLOY_BASE, deployed_rbac
    from sim.server import RunningServer
    from sim.spec import SpecError, load

    try:
        spec = load(Path(args.spec).read_text() if args.spec else
                    f"nodes: [{{count: {args.nodes}, gpusPerNode: {args.gpus_per_node}}}]")
    except (OSError, SpecError) as error:
        log.error("cannot use the spec %s: %s", args.spec or "(from flags)", error)
        return 2
    try:
        authorizer = deployed_rbac()
    except (OSError, ValueError) as error:  # an install without the checkout's deploy/ (the image)
        log.warning("no RBAC from %s (%s): every authenticated request is allowed", DEPLOY_BASE, error)
        authorizer = None
    clock = RealClock()
    api = APIServer(native_pod_groups=args.native_pod_groups, webhook_services=dict(args.webhook_route),
                    clock=clock.now)
    admin_token, controller_token = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    tokens = {admin_token: ADMIN, controller_token: CONTROLLER}
    tls = _issue_tls(Path(args.kubeconfig_out).resolve().parent / "sim-tls") if args.tls else {}
    server = RunningServer(api, port=args.port, tokens=tokens, authorizer=authorizer, **tls)
    kubeconfig = Path(args.kubeconfig_out)
    ca_file = str(Path(tls["certfile"]).with_name("ca.crt")) if tls else None
    write_kubeconfig(kubeconfig, server.url, admin_token, ca_file)
    write_kubeconfig(f"{kubeconfig}.controller", server.url, controller_token, ca_file)
    runner = ThreadRunner(emulated_cluster(api, clock, spec=spec)).start()
    stopped = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopped.set())
    print(f"emulated cluster at {server.url}: {len(api.list('nodes'))} nodes\n"
          f"  kubectl --kubeconfig {kubeconfig} get nodes,pods -A\n"
          f"  gangkeeper controller --kubeconfig {kubeconfig}.controller\n"
          f"Ctrl-C stops it.", flush=True)
    stopped.wait()
    runner.stop()
    server.stop()
    return 0


def _issue_tls(directory: Path) -> dict:
    """A CA and a serving certificate for 127.0.0.1 and localhost, written to `directory`."""
    from gangkeeper.certs.files import write_certs
    from gangkeeper.certs.issue import issue

    issued = issue("sim-apiserver", "default", datetime.datetime.now(datetime.timezone.utc), 30,
                   dns_names=("localhost",), ips=(ipaddress.ip_address("127.0.0.1"),))
    write_certs(directory, issued)
    return {"certfile": str(directory / "tls.crt"), "keyfile": str(directory / "tls.key")}
