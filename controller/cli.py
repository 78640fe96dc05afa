"""`gangkeeper controller`: flags, then the loop (runner), leader election, probes and metrics."""

import argparse
import logging
import os
import signal
import socketserver
import sys
import threading
from collections.abc import Callable
from fractions import Fraction
from http.server import ThreadingHTTPServer
from typing import TYPE_CHECKING, TypeVar

from gangkeeper import names
from gangkeeper.audit import AuditLog, open_audit_log
from gangkeeper.cli import CommandError, check_can_listen, credentials_problem, listen_problem, one_line
from gangkeeper.config import add_bool_flag, add_flag, env_name, int_in_range, log_config, one_of, port, positive_int
from gangkeeper.integrations.finding import LABEL_KEY_RULE, is_valid_label_key
from gangkeeper.names import ZONE_LABEL
from gangkeeper.quantity import parse_quantity

if TYPE_CHECKING:  # imported by `run` alone, so that `gangkeeper --help` does not load the Kubernetes client
    from gangkeeper.controller.deciding.settings import Settings
    from gangkeeper.controller.leader import LeaderElector
    from gangkeeper.controller.metrics import Metrics
    from gangkeeper.controller.reading.kube import Kube
    from gangkeeper.controller.runner import Controller

Server = TypeVar("Server", bound=socketserver.BaseServer)

log = logging.getLogger("gangkeeper.controller")
SYNC_TIMEOUT_SECONDS = 120.0
DESCRIPTION = (
    "Admit training jobs whole. The controller watches the pods gangkeeper's webhook gated, groups them "
    "(by Job, JobSet stage, TrainJob, PyTorchJob, MPIJob, LeaderWorkerSet group, RayCluster, PodGroup or "
    "gangkeeper.io/group label), and when the cluster has room "
    "for a whole group it reserves the nodes and removes the members' scheduling gate, so that the "
    "kube-scheduler binds them together; a group that does not fit waits in a queue, whole. Each group's "
    "state is in its Gang (kubectl get gangs) and its Events. Audit lines (one JSON object per decision) "
    "go to stdout, or to --audit-file; log lines go to stderr. Run two replicas: one leads (a Lease), the "
    "other waits to take over.")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("controller", help="reserve capacity for whole groups and release their gates",
                                   description=DESCRIPTION)
    add_flag(parser, "--kubeconfig", default=None,
             help="kubeconfig file; when unset: the pod's service account, else $KUBECONFIG or ~/.kube/config")
    add_flag(parser, "--namespace", default=None,
             help="only manage groups in this namespace (all when unset); pods of every namespace still count "
                  "against node capacity")
    add_bool_flag(parser, "--dry-run", help="decide, log and audit, but write nothing")
    add_bool_flag(parser, "--once", help="sync the caches, run one pass without leader election, exit")
    add_flag(parser, "--resync-seconds", default=30, type=positive_int, help="a pass at least this often")
    add_flag(parser, "--bind-timeout-seconds", default=120, type=positive_int,
             help="a released member not bound this long (or reported Unschedulable) rolls its group back: an owner "
                  "with a suspend switch (Job, JobSet, TrainJob, PyTorchJob, MPIJob, RayJob, RayCluster) is suspended "
                  "and resumed after an exponential backoff, which does not count against its failure budget; other "
                  "members are deleted (but see --rollback-ownerless)")
    add_flag(parser, "--rollback-ownerless", default="delete", type=one_of("delete", "keep"),
             choices=("delete", "keep"),
             help="what a rollback does with members no owner recreates: delete every one of them (bound ones hold "
                  "accelerators and can never be gated again; the Gang says what to resubmit), or keep them, "
                  "holding what they hold until someone deletes them")
    add_flag(parser, "--preemption", default="LowerPriority", type=one_of("LowerPriority", "Never"),
             choices=("LowerPriority", "Never"),
             help="whether a group that does not fit takes the place of work of strictly lower priority (whole "
                  "groups: suspended when their owner can be, else deleted; lone pods: evicted through the "
                  "Eviction API), or waits; a group whose PriorityClass says preemptionPolicy: Never always waits")
    add_flag(parser, "--policy", default="BestEffortFIFO", choices=("BestEffortFIFO", "StrictFIFO"),
             help="queue order")
    add_flag(parser, "--starvation-seconds", default=300, type=int_in_range(0, 10**7, "a number of seconds"),
             help="under BestEffortFIFO, a group waiting this long gets freed capacity held for it")
    add_flag(parser, "--zone-label", default=ZONE_LABEL, type=_label_key,
             help="node label of the domains a group without a topology rule of its own is kept inside when it "
                  "fits in one")
    add_flag(parser, "--rack-label", default="", type=_label_key,
             help="a finer node label (a rack, a block, an NVLink domain: cloud.google.com/gce-topology-block, "
                  "nvidia.com/gpu.clique) tried before --zone-label for groups without a rule of their own; "
                  "none when unset")
    add_flag(parser, "--incomplete-group-seconds", default=300, type=int_in_range(1, 10**7, "a number of seconds"),
             help="a group with fewer pods than its min count, all gated, that gains no new pod for this long is "
                  "reported (Warning Event IncompleteGroup, Gang condition Stuck): it may be declared larger than "
                  "what its owner creates before it runs, and then never completes")
    add_bool_flag(parser, "--fail-on-schedule-timeout",
                  help="give up a group not admitted within its schedule timeout (Gang phase Failed) "
                       "instead of reporting TimedOut and waiting on")
    add_flag(parser, "--capacity-provisioning", default="None",
             type=one_of("None", "ProvisioningRequest", "Placeholders"),
             choices=("None", "ProvisioningRequest", "Placeholders"),
             help="how a group waiting for capacity that new nodes could supply asks an autoscaler for them: one "
                  "atomic ProvisioningRequest (cluster-autoscaler; PodTemplates in the group's shape, released onto "
                  "the nodes it provisioned), Placeholders (pending pause pods in the group's shape, of the "
                  f"negative PriorityClass {names.PLACEHOLDER_PRIORITY_CLASS}, for any autoscaler: Karpenter), or "
                  "None: it waits for capacity to come free")
    add_flag(parser, "--provisioning-class", default=names.BEST_EFFORT_ATOMIC_SCALE_UP, type=_nonempty,
             help="the ProvisioningRequest's provisioningClassName (check-capacity.autoscaling.x-k8s.io, or a "
                  "class of your cloud's)")
    add_flag(parser, "--placeholder-seconds", default=900, type=int_in_range(1, 10**7, "a number of seconds"),
             help="placeholders not all bound this long are taken back, and asked again after a backoff that "
                  "doubles from 60s to 960s")
    add_flag(parser, "--provisioning-limits", default="", type=_limits,
             help="the most the autoscaler may add, RESOURCE=QUANTITY,… (nvidia.com/gpu=64,cpu=1024): a group "
                  "asking for more is reported once (TooLargeToProvision) and asks for nothing; no limit when unset")
    add_flag(parser, "--pod-events-per-pass", default=1000, type=int_in_range(0, 100_000, "a number of Events"),
             help="Events a pass writes on pods at most, each telling a gated member why it waits (when it first "
                  "waits and when the reason changes) or that it was released; the rest are told by the passes "
                  "that follow; 0 tells none")
    add_flag(parser, "--concurrent-writes", default=16, type=int_in_range(1, 32, "a number of writes"),
             help="pod, owner and Gang writes a pass may have in flight at once (each object's in order), over at "
                  "most 32 kept-alive connections, with its Events written by 4 writers in the background; 1 sends "
                  "every write, Events too, one after the other")
    add_flag(parser, "--health-port", default=8081, type=port, help="/healthz and /readyz")
    add_flag(parser, "--metrics-port", default=8080, type=port, help="Prometheus /metrics")
    add_flag(parser, "--audit-file", default="", help="audit log file, size-rotated; stdout when unset")
    add_flag(parser, "--lease-namespace", default=names.DEFAULT_NAMESPACE, help="namespace of the leader Lease")
    add_flag(parser, "--lease-name", default=names.CONTROLLER_LEASE, help="name of the leader Lease")
    add_flag(parser, "--identity", default=None,
             help="leader election identity; $POD_NAME plus a random suffix when unset")
    parser.set_defaults(run=run)


def _label_key(text: str) -> str:
    """An argparse type: a node label key, or "" for none."""
    if text and not is_valid_label_key(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not accepted: write {LABEL_KEY_RULE}")
    return text


def _nonempty(text: str) -> str:
    """An argparse type: any text but none."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty value is not accepted: write a name")
    return text.strip()


def _limits(text: str) -> dict[str, Fraction]:
    """An argparse type: RESOURCE=QUANTITY pairs, comma-separated; "" for none."""
    limits: dict[str, Fraction] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        resource, equals, quantity = item.partition("=")
        if not equals or not resource.strip():
            raise argparse.ArgumentTypeError(f"{item!r} is not accepted: write RESOURCE=QUANTITY, "
                                             f"such as nvidia.com/gpu=64")
        try:
            limits[resource.strip()] = parse_quantity(quantity.strip())
        except ValueError as error:
            raise argparse.ArgumentTypeError(f"{item!r}: {error}") from None
    return limits


def settings_from(args: argparse.Namespace) -> "Settings":
    from gangkeeper.controller.deciding.settings import (
        CapacityProvisioning,
        Ownerless,
        Preempting,
        Provisioning,
        Settings,
    )
    from gangkeeper.controller.planning.plans import Topology
    from gangkeeper.controller.planning.queue import Order, QueuePolicy
    topology = Topology(zone_label=args.zone_label or None, rack_label=args.rack_label or None)
    return Settings(bind_timeout_seconds=float(args.bind_timeout_seconds),
                    policy=QueuePolicy(order=Order(args.policy), starvation_seconds=float(args.starvation_seconds),
                                       topology=topology),
                    fail_on_schedule_timeout=args.fail_on_schedule_timeout,
                    incomplete_group_seconds=float(args.incomplete_group_seconds),
                    pod_events_per_pass=args.pod_events_per_pass,
                    rollback_ownerless=Ownerless(args.rollback_ownerless),
                    preemption=Preempting(args.preemption),
                    provisioning=Provisioning(mode=CapacityProvisioning(args.capacity_provisioning),
                                              provisioning_class=args.provisioning_class,
                                              placeholder_seconds=float(args.placeholder_seconds),
                                              limits=args.provisioning_limits))


def run(args: argparse.Namespace, stop: threading.Event | None = None) -> int:
    # Imported here so that `gangkeeper --help` does not load the Kubernetes client.
    from gangkeeper.controller.health import serve_health
    from gangkeeper.controller.leader import LeaderElector
    from gangkeeper.controller.metrics import Metrics
    from gangkeeper.controller.reading.kube import load
    from gangkeeper.controller.runner import Controller

    # Log lines to stderr, audit lines to stdout (or --audit-file): one stream per purpose.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s",
                        stream=sys.stderr)
    kube = _load(load, args.kubeconfig)
    audit = _open_audit_log(args.audit_file)
    if not args.once:
        for flag, what in (("--health-port", "/healthz and /readyz"), ("--metrics-port", "/metrics")):
            check_can_listen("0.0.0.0", getattr(args, flag[2:].replace("-", "_")), what, flag, env_name(flag))
    log_config("controller", args)
    metrics = Metrics()
    controller = Controller(kube, settings_from(args), audit, metrics,
                            namespace=args.namespace, dry_run=args.dry_run,
                            resync_seconds=float(args.resync_seconds),
                            concurrent_writes=args.concurrent_writes).start()
    try:
        if args.once:
            if not controller.wait_synced(SYNC_TIMEOUT_SECONDS):
                log.error("caches did not sync within %.0fs", SYNC_TIMEOUT_SECONDS)
                return 1
            controller.reconcile_once()
            return 0
        return _serve(args, controller, metrics, kube, stop or _stopped_by_sigterm(), serve_health, LeaderElector,
                      audit)
    finally:
        controller.stop()


def _load(load: Callable[[str | None], "Kube"], kubeconfig: str | None) -> "Kube":
    """The API client, or a one-line CommandError saying which credentials are missing."""
    from kubernetes.config.config_exception import ConfigException

    try:
        return load(kubeconfig)
    except (ConfigException, OSError) as error:  # OSError: a file the kubeconfig names (a CA) is missing
        in_cluster = kubeconfig is None and "KUBERNETES_SERVICE_HOST" in os.environ
        raise credentials_problem(kubeconfig, "--kubeconfig", env_name("--kubeconfig"), error, in_cluster) from None


def _open_audit_log(path: str) -> AuditLog:
    try:
        return open_audit_log("controller", path)
    except OSError as error:
        raise CommandError(f"cannot write the audit log {path}: {one_line(error.strerror or error)}; pass a file "
                           f"you can write with --audit-file (env {env_name('--audit-file')}), or none for "
                           f"stdout") from None


def _listening(start: Callable[[int], Server], port: int, what: str, flag: str) -> Server:
    """`start(port)`, the port's trouble (in use, privileged) said in one line."""
    try:
        return start(port)
    except OSError as error:
        raise listen_problem(error, f"0.0.0.0:{port}", what, flag, env_name(flag)) from None


def _stopped_by_sigterm() -> threading.Event:
    """Set on SIGTERM (the kubelet stopping the pod): the leader hands its Lease back on the way out,
    so that the other replica takes over at its next try instead of after a whole lease duration."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    return stop


def _serve(args: argparse.Namespace, controller: "Controller", metrics: "Metrics", kube: "Kube",
           stop: threading.Event, serve_health: Callable[[int, Callable[[], bool], Callable[[], bool]],
                                                         ThreadingHTTPServer],
           elector_class: type["LeaderElector"], audit: AuditLog | None = None) -> int:
    health = _listening(lambda port: serve_health(port, lambda: controller.alive(3 * args.resync_seconds + 30),
                                                  controller.synced),
                        args.health_port, "/healthz and /readyz", "--health-port")
    try:
        metrics_server = _listening(metrics.serve, args.metrics_port, "/metrics", "--metrics-port")
    except CommandError:
        health.shutdown()
        raise
    elector: "LeaderElector | None" = None

    def leadership(event: str) -> None:
        """An audit line when this replica starts or stops leading, naming it: with the decisions'
        lines between them, the audit log shows which replica acted when (two never at once)."""
        if audit is not None and elector is not None:
            audit.record(event, decision=event.split(".")[1], namespace=args.lease_namespace,
                         details={"identity": elector.identity, "lease": args.lease_name})

    def started() -> None:
        leadership("leader.started")
        controller.wake()

    elector = elector_class(kube, args.lease_namespace, args.lease_name, args.identity,
                            on_started_leading=started,
                            on_stopped_leading=lambda: leadership("leader.stopped"))
    elector.start()
    try:
        controller.run(stop, lambda: elector.is_leader)
    except KeyboardInterrupt:
        pass
    finally:
        elector.stop()
        health.shutdown()
        metrics_server.shutdown()
    return 0
