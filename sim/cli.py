"""`gangkeeper sim serve`: an emulated GPU cluster in one process, for kubectl, the controller and you.

The API server (sim/apiserver.py over sim/server.py) is served on 127.0.0.1, in real time, with
the emulated kube-scheduler, kubelet and workload operators running against it. Two kubeconfigs
are written: one for `kubernetes-admin` (yours, and kubectl's) and one authenticating as the
controller's service account, so that a real `gangkeeper controller --kubeconfig` is the only
client the webhook lets remove gates. Requests are authorized by the RBAC objects of this
checkout's deploy/base, as on a cluster where gangkeeper is installed: the controller may do what
its manifests grant and nothing else (an install without deploy/ serves without authorization,
and says so).

Unless --bare, gangkeeper is installed in it as deploy/ installs it: the `gangkeeper` namespace and
the webhook configurations, their caBundle written by `gangkeeper certs install`, and the real
webhook and controller as child processes (sim/playground.py). Every file goes into the work
directory it prints (TLS files, kubeconfigs, logs). Stop it with Ctrl-C.
"""

import argparse
import logging
import re

from gangkeeper import names
from gangkeeper.config import add_bool_flag, add_flag, int_in_range, port, positive_number

log = logging.getLogger("gangkeeper.sim")
MAX_GPUS_PER_NODE = 64
MAX_NODE_GROUP_SIZE = 1000



def _route(text: str) -> tuple[str, str]:
    """`SERVICE.NAMESPACE.svc:PORT=HOST:PORT` → the pair the admission chain routes by."""
    service, separator, target = text.partition("=")
    if not separator or ".svc" not in service or ":" not in target:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a webhook route; write SERVICE.NAMESPACE.svc:PORT=HOST:PORT, "
            f"e.g. {names.WEBHOOK_SERVICE}.{names.DEFAULT_NAMESPACE}.svc:443=127.0.0.1:9443")
    return service, target


NODE_GROUP_FORMAT = "NAME:GPUS_PER_NODE:MAX[:PROVISIONING_SECONDS]"
_NODE_GROUP_EXAMPLE = "gpu-pool:8:4:60"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def _node_group(text: str) -> dict:
    """`NAME:GPUS_PER_NODE:MAX[:PROVISIONING_SECONDS]` → a node group of the spec (`nodeGroups`, min 0;
    without seconds, the spec's default)."""
    parts = text.split(":")

    def refuse(problem: str) -> argparse.ArgumentTypeError:
        return argparse.ArgumentTypeError(f"{text!r} is not a node group: {problem}; write {NODE_GROUP_FORMAT}, "
                                          f"e.g. {_NODE_GROUP_EXAMPLE}")

    if len(parts) not in (3, 4):
        raise refuse(f"{len(parts)} parts, not 3 or 4")
    name, gpus, most = parts[:3]
    if not _DNS_LABEL.match(name):
        raise refuse(f"NAME {name!r} is not a DNS label (lowercase letters, digits and '-')")
    if _whole(gpus, 0, MAX_GPUS_PER_NODE) is None:
        raise refuse(f"GPUS_PER_NODE {gpus!r} is not a whole number from 0 to {MAX_GPUS_PER_NODE}")
    if _whole(most, 1, MAX_NODE_GROUP_SIZE) is None:
        raise refuse(f"MAX {most!r} is not a whole number from 1 to {MAX_NODE_GROUP_SIZE}")
    group: dict = {"name": name, "gpusPerNode": int(gpus), "max": int(most)}
    if len(parts) == 4:
        seconds = _seconds(parts[3])
        if seconds is None:
            raise refuse(f"PROVISIONING_SECONDS {parts[3]!r} is not a number of seconds, 0 or more")
        group["provisioningSeconds"] = seconds
    return group


def _whole(text: str, low: int, high: int) -> int | None:
    """A whole number from `low` to `high` written in ASCII digits, or None."""
    return int(text) if re.fullmatch(r"[0-9]+", text) and low <= int(text) <= high else None


def _seconds(text: str) -> float | None:
    """A finite number of seconds, 0 or more, or None."""
    try:
        seconds = float(text)
    except ValueError:
        return None
    return seconds if 0 <= seconds < float("inf") else None


# `--help`, for the user (the module's docstring is for whoever changes it).
SIM_DESCRIPTION = """\
A Kubernetes cluster emulated in one process, to try gangkeeper without a cluster.

  serve    an API server on 127.0.0.1 with GPU nodes, and the kube-scheduler, kubelets and the
           operators of Jobs, StatefulSets, PyTorchJobs, JobSets, TrainJobs, MPIJobs,
           LeaderWorkerSets and Ray emulated in real time; gangkeeper's webhook and controller
           run in it as deploy/ installs them (--bare: the cluster alone).
           kubectl works against it with the kubeconfig it prints.

A development tool of a checkout (`make install`), not a cluster to run work on.
"""
SERVE_DESCRIPTION = """\
Serve the emulated cluster until Ctrl-C: an API server on 127.0.0.1 (--port) with --nodes GPU
nodes of --gpus-per-node GPUs (or the nodes and workloads of --spec), and the kube-scheduler,
kubelets and workload operators emulated in real time. With --node-group, a cluster-autoscaler is
emulated too: it adds nodes to the group for pods the scheduler cannot place (not gated ones) and
for ProvisioningRequests (autoscaling.x-k8s.io/v1), and removes nodes that stand empty. Unless
--bare, gangkeeper runs in it as on a real cluster: the gangkeeper namespace, the webhook
configurations with their caBundle (written by `gangkeeper certs install`), the webhook and the
controller. It prints the kubeconfig
to use and commands to try; every file it writes goes into the work directory it names.

An emulated pod runs as long as its sim.gangkeeper.io/duration-seconds annotation says, else as
long as its containers' `sleep N` (the shipped JobSet examples), else until it is stopped. With
--run-seconds, a pod that runs to completion (restartPolicy Never or OnFailure: a Job's, a
JobSet's, a TrainJob's, a RayJob's submitter) and runs a real program (`tune run`, `ray job
submit`, `mpirun`) finishes after that many seconds of running with the rest of its job, so that
such workloads complete; servers (restartPolicy Always: LWS pods, Ray heads and workers) keep
running.
"""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("sim", help="run the emulated GPU cluster (API server, scheduler, kubelet)",
                                   description=SIM_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="sim_command", metavar="COMMAND", required=True)
    serve = commands.add_parser("serve", help="serve the emulated cluster until interrupted",
                                description=SERVE_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flag(serve, "--spec", default="", env="GANGKEEPER_SIM_SPEC",
             help="YAML file of nodes and workloads (sim/spec.py); overrides --nodes/--gpus-per-node")
    add_flag(serve, "--nodes", default=6, type=int_in_range(0, 10_000, "a node count"), env="GANGKEEPER_SIM_NODES",
             help="GPU nodes, when no --spec is given (0: only those of --node-group)")
    add_flag(serve, "--gpus-per-node", default=8, type=int_in_range(0, MAX_GPUS_PER_NODE, "a GPU count"),
             env="GANGKEEPER_SIM_GPUS_PER_NODE", help="GPUs per node, when no --spec is given")
    add_flag(serve, "--port", default=6443, type=port, env="GANGKEEPER_SIM_PORT", help="port on 127.0.0.1")
    add_bool_flag(serve, "--tls", env="GANGKEEPER_SIM_TLS",
                  help="with --bare: serve HTTPS with a fresh CA (kubectl sends tokens only over HTTPS); "
                       "always on otherwise")
    add_flag(serve, "--kubeconfig-out", default="", env="GANGKEEPER_SIM_KUBECONFIG_OUT",
             help="kubeconfig for kubernetes-admin (unset: WORK_DIR/kubeconfig); FILE.controller is written "
                  "for the controller's identity")
    add_flag(serve, "--work-dir", default="", env="GANGKEEPER_SIM_WORK_DIR",
             help="directory for the TLS files, kubeconfigs and logs (unset: a fresh temporary directory)")
    add_bool_flag(serve, "--bare", env="GANGKEEPER_SIM_BARE",
                  help="serve the cluster alone: no gangkeeper namespace, webhook or controller")
    add_flag(serve, "--run-seconds", default=None, type=positive_number, env="GANGKEEPER_SIM_RUN_SECONDS",
             help="seconds a pod that runs to completion (restartPolicy Never or OnFailure) runs when neither its "
                  "duration annotation nor a `sleep N` script says (unset: until stopped); pods with "
                  "restartPolicy Always run until stopped", metavar="SECONDS")
    add_bool_flag(serve, "--native-pod-groups", env="GANGKEEPER_SIM_NATIVE_POD_GROUPS",
                  help="serve scheduling.k8s.io/v1beta1 PodGroups, as a 1.37 cluster with the gate on")
    serve.add_argument("--webhook-route", action="append", type=_route, default=[], metavar="ROUTE",
                       help="SERVICE.NAMESPACE.svc:PORT=HOST:PORT: where a service-referenced webhook "
                            "really listens (repeatable)")
    serve.add_argument("--node-group", action="append", type=_node_group, default=[], metavar="GROUP",
                       help=f"{NODE_GROUP_FORMAT}: a node group the emulated cluster-autoscaler grows from 0 to MAX "
                            f"nodes of GPUS_PER_NODE GPUs, each Ready PROVISIONING_SECONDS after its scale-up "
                            f"(default 60), and shrinks when they stand empty; besides --nodes or --spec (repeatable)")
    serve.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from sim.playground import serve  # checks the port first: a busy one is refused in one line, before any log

    return serve(args)
