"""`kubectl gang` (the `kubectl-gang` executable kubectl finds on PATH): flags, one answer, errors
in one line.

kubectl hands a plugin every word after its name and none of its own flags, so the plugin reads
`--kubeconfig`, `--context`, `-n/--namespace` and `-A/--all-namespaces` itself, before or after
the subcommand, and $KUBECONFIG as kubectl does (`connect`). It only reads, with the user's own
credentials. How the controller it answers for is set (`--policy`, `--starvation-seconds`,
`--zone-label`, `--rack-label`, `--preemption`) is taken from the controller's flags' defaults,
or from the same flags (and environment variables) given here.

A failure the user can fix — no kubeconfig, a refused read, an unknown pod or Gang, a bad file,
an API server that does not answer — ends the command with one line on stderr, `kubectl gang:
...`, and exit code 1; a usage error exits 2.
"""

import argparse
import json
import logging
import re
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path

from gangkeeper import names
from gangkeeper.cli import CommandError, one_line
from gangkeeper.config import add_flag, int_in_range, one_of
from gangkeeper.controller.planning.plans import Topology
from gangkeeper.controller.planning.queue import Order, QueuePolicy
from gangkeeper.controller.reading import kube as api
from gangkeeper.controller.reading.pods import pod_facts
from gangkeeper.controller.reading.workloads import workload_from_api
from gangkeeper.integrations.finding import LABEL_KEY_RULE, is_valid_label_key
from gangkeeper.plugin import explain, render, submitted
from gangkeeper.plugin.connect import Connection, connect
from gangkeeper.plugin.documents import read_documents, to_yaml
from gangkeeper.plugin.reading import (
    Cluster,
    read_cluster,
    read_events,
    read_gangs,
    read_namespace,
    read_pod,
    read_priority_classes,
)
from gangkeeper.plugin.top import top

PROG = "kubectl gang"
FAILED = 1
OUTPUTS = ("table", "json", "yaml")
DESCRIPTION = (
    "gangkeeper's answers about gangs, read only, with your kubeconfig and permissions. `why POD|GANG` says where "
    "a group stands and why it waits; `plan -f FILE` says how a workload not yet submitted would be grouped and "
    "placed now; `top` lists the groups by phase. The answers are the controller's own: its reading of the "
    "cluster, its queue, planner and preemption.")


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    common.add_argument("--kubeconfig", metavar="FILE",
                        help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else the pod's service "
                             "account)")
    common.add_argument("--context", metavar="NAME", help="the kubeconfig context to use (default: its current one)")
    common.add_argument("-n", "--namespace", metavar="NAMESPACE",
                        help="the namespace (default: the context's, else default)")
    common.add_argument("-o", "--output", choices=OUTPUTS, help="table for people (default), json or yaml for scripts")
    parser = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION, parents=[common])
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    why = commands.add_parser("why", parents=[common], help="where a group stands and why it waits",
                              description="The group of a pod or Gang: its members and where each stands, why it "
                                          "waits (the constraint, the nodes that came closest and what each "
                                          "lacks), its place in the queue, what it could preempt, its Events.")
    why.add_argument("target", metavar="POD|GANG",
                     help="a pod of the group (pod/NAME), its Gang (gang/NAME), or either, or its group label (NAME)")
    _planning_flags(why)
    why.set_defaults(run=_why)
    plan = commands.add_parser("plan", parents=[common], help="how a workload not yet submitted would be placed now",
                               description="The groups a manifest would make (Job, JobSet, PyTorchJob, MPIJob, "
                                           "LeaderWorkerSet, RayCluster, RayJob, Pod, Gang, PodGroup), their size "
                                           "as gangkeeper reads it, and whether each fits now and on which nodes, "
                                           "what it would preempt at its priority, or what blocks it.")
    plan.add_argument("-f", "--filename", required=True, metavar="FILE", help="the manifest; - reads stdin")
    _planning_flags(plan)
    plan.set_defaults(run=_plan)
    top_parser = commands.add_parser("top", parents=[common], help="the groups by phase, waiting time and "
                                                                   "accelerators",
                                     description="Every Gang of the namespace (or, with -A, of every namespace you "
                                                 "may read: those you may not are skipped and said so), by phase.")
    top_parser.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace you may read")
    top_parser.set_defaults(run=_top)
    return parser


def _planning_flags(parser: argparse.ArgumentParser) -> None:
    """The controller's flags that change its answer, with its defaults (and environment variables)."""
    add_flag(parser, "--policy", default="BestEffortFIFO", type=one_of("BestEffortFIFO", "StrictFIFO"),
             help="the controller's queue order")
    add_flag(parser, "--starvation-seconds", default=300, type=int_in_range(0, 10**7, "a number of seconds"),
             help="the controller's --starvation-seconds")
    add_flag(parser, "--zone-label", default=names.ZONE_LABEL, type=_label_key, help="the controller's --zone-label")
    add_flag(parser, "--rack-label", default="", type=_label_key, help="the controller's --rack-label; none when unset")
    add_flag(parser, "--preemption", default="LowerPriority", type=one_of("LowerPriority", "Never"),
             help="the controller's --preemption")


def _label_key(text: str) -> str:
    if text and not is_valid_label_key(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not accepted: write {LABEL_KEY_RULE}")
    return text


def planning_from(args: argparse.Namespace) -> explain.Planning:
    topology = Topology(zone_label=args.zone_label or None, rack_label=args.rack_label or None)
    return explain.Planning(QueuePolicy(Order(args.policy), float(args.starvation_seconds), topology),
                            preemption=args.preemption == "LowerPriority")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    _log_in_one_line()
    try:
        sys.stdout.write(args.run(args, time.time()))
        sys.stdout.flush()
    except CommandError as error:
        return _failed(str(error))
    except api.KubeError as error:
        return _failed(api_problem(error))
    except BrokenPipeError:  # `kubectl gang top | head`
        return 0
    except KeyboardInterrupt:
        return 130
    return 0


class _OneLine(logging.Formatter):
    """What the controller's code logs on the way (a group it cannot make of its pods, left out), on
    one line and without the traceback the controller's own log keeps."""

    def format(self, record: logging.LogRecord) -> str:
        return f"{PROG}: {record.levelname.lower()}: {one_line(record.getMessage())}"


def _log_in_one_line() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine())
    logger = logging.getLogger("gangkeeper")
    logger.handlers, logger.propagate = [handler], False
    logger.setLevel(logging.WARNING)


def _failed(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)
    return FAILED


def api_problem(error: api.KubeError) -> str:
    """An API failure the plugin did not expect, in one line saying what to do."""
    if error.status == 0:
        address = re.search(r"host='([^']*)', port=(\d+)", error.message)
        cause = re.search(r"\[Errno -?\d+\] ([^'\")]+)", error.message)
        where = f" at {address[1]}:{address[2]}" if address else ""
        return (f"cannot reach the API server{where} ({cause[1] if cause else one_line(error.message)}); check the "
                f"kubeconfig's server, or pass another --context")
    if error.status == 401:
        return "the API server refused your credentials (401 Unauthorized); log in again, or pass another --context"
    if isinstance(error, api.Forbidden):
        return f"forbidden: {one_line(error.message)}; ask your cluster's admin for read access to it"
    return f"the API server answered {error.status} {error.reason}: {one_line(error.message)}"


# --- the commands ------------------------------------------------------------------------------


def _connect(args: argparse.Namespace) -> tuple[Connection, str]:
    connection = connect(getattr(args, "kubeconfig", None), getattr(args, "context", None))
    return connection, getattr(args, "namespace", None) or connection.namespace


def _why(args: argparse.Namespace, now: float) -> str:
    connection, namespace = _connect(args)
    kube = connection.kube
    cluster = read_cluster(kube, [namespace])
    index = cluster.index()
    views = index.pending({}, now).views
    found = explain.find_group(index, views, namespace, args.target)
    if found is None:
        raise CommandError(_unknown(kube, namespace, args.target))
    view, gang = found
    kind, _, name = args.target.rpartition("/")
    about = [("Gang", gang.name)] if gang is not None else []
    if kind.lower() in explain.POD_KINDS or (not kind and f"{namespace}/{name}" in index.pods):
        about.append(("Pod", name))
    events, refused = read_events(kube, namespace, about)
    answer = explain.why(index, views, view, gang, None if refused else events, planning_from(args), now,
                         [*cluster.unread, *([refused] if refused else [])])
    return _output(args, answer, lambda: render.why_table(answer, now))


def _unknown(kube: api.Kube, namespace: str, target: str) -> str:
    """Why `target` names no group: no such pod or Gang, or a pod that is no member."""
    kind, _, name = target.rpartition("/")
    if kind and kind.lower() not in explain.POD_KINDS | explain.GANG_KINDS:
        return f"{target} is neither a pod nor a Gang: name a pod (pod/NAME), a Gang (gang/NAME) or a group label"
    if kind.lower() in explain.GANG_KINDS:
        return f"no Gang {name} in namespace {namespace} (kubectl get gangs -n {namespace})"
    pod = read_pod(kube, namespace, name)
    if pod is None:
        return (f"no pod or Gang named {name} in namespace {namespace}; name a pod of the group, its Gang or its "
                f"group label (kubectl get gangs -n {namespace})")
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if names.GROUP_LABEL not in labels:
        return (f"pod {namespace}/{name} is in no group: it carries no {names.GROUP_LABEL} label (the webhook labels "
                f"and gates a training pod when it is created in a namespace labelled "
                f"{names.ENFORCE_LABEL}={names.ENFORCE_VALUE})")
    return f"pod {namespace}/{name} is labelled into group {labels[names.GROUP_LABEL]}, which the cluster's pods do not show"


def _plan(args: argparse.Namespace, now: float) -> str:
    source = "stdin" if args.filename == "-" else args.filename
    documents = read_documents(_file_text(args.filename), source)
    connection, namespace = _connect(args)
    kube = connection.kube
    created = datetime.fromtimestamp(now, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        made = submitted.expand(documents, namespace, created)
    except submitted.BadManifest as error:
        raise CommandError(f"{source}: {error}") from None
    if not made.pods:
        left = "; ".join(made.left_out) or "no workload"
        raise CommandError(f"{source} makes no pods to plan ({left}); pass a Job, JobSet, PyTorchJob, MPIJob, "
                           f"LeaderWorkerSet, RayCluster, RayJob or Pod")
    planning = planning_from(args)
    classes, unread = read_priority_classes(kube, submitted.named_priority_classes(made.pods))
    classes.update({c["metadata"]["name"]: c for c in made.priority_classes})
    pods, left_out = [], list(made.left_out)
    for pod in made.pods:
        try:
            admitted, reason = submitted.admitted(pod, classes, planning.patterns)
        except submitted.BadManifest as error:
            raise CommandError(f"{source}: {error}") from None
        if admitted is None:
            left_out.append(f"pod {pod['metadata']['name']}: gangkeeper leaves it alone ({reason})")
        else:
            pods.append(admitted)
    namespaces = sorted({pod["metadata"]["namespace"] for pod in made.pods})
    warnings = [warning for ns in namespaces if (warning := _not_enforced(kube, ns, made.namespaces)) is not None]
    cluster = read_cluster(kube, namespaces)
    _refuse_existing(cluster, made, source)
    facts = [fact for fact in map(pod_facts, pods) if fact is not None]
    workloads = [workload_from_api(resource, obj) for resource, obj in made.owners]
    index = cluster.index(facts, workloads)
    views = index.pending({}, now).views
    answer = explain.plan(index, views, {fact.member.uid for fact in facts}, planning, now, left_out, warnings,
                          [*cluster.unread, *([unread] if unread else [])])
    return _output(args, answer, lambda: render.plan_table(answer, now))


def _file_text(filename: str) -> str:
    if filename == "-":
        return sys.stdin.read()
    try:
        return Path(filename).read_text()
    except (OSError, UnicodeDecodeError) as error:
        why = error.strerror if isinstance(error, OSError) and error.strerror else one_line(error)
        raise CommandError(f"cannot read {filename}: {why}; pass the manifest's path with -f, or - for stdin") from None


def _not_enforced(kube: api.Kube, namespace: str, in_file: Sequence[dict]) -> str | None:
    """What to say when the webhook would not gate pods in the namespace (or that cannot be told)."""
    found = next((ns for ns in in_file if ns["metadata"].get("name") == namespace), None)
    try:
        found = found if found is not None else read_namespace(kube, namespace)
    except api.Forbidden:
        return f"namespace {namespace} could not be read: the plan takes it to be enforced"
    if found is None:
        return (f"namespace {namespace} does not exist, and the API server refuses objects in it until it is "
                f"created: this is the plan once it is, enforced")
    if ((found.get("metadata") or {}).get("labels") or {}).get(names.ENFORCE_LABEL) != names.ENFORCE_VALUE:
        return (f"namespace {namespace} is not labelled {names.ENFORCE_LABEL}={names.ENFORCE_VALUE}: the webhook "
                f"would not gate these pods; this is the plan were it enforced")
    return None


def _refuse_existing(cluster: Cluster, made: submitted.Submitted, source: str) -> None:
    """A workload or pod the cluster holds already: creating it would be refused, and planning it
    would take the place of the one that runs."""
    existing = {(resource, obj["metadata"]["namespace"], obj["metadata"]["name"]) for resource, obj in made.owners}
    taken = sorted(existing & set(cluster.workloads))
    present = {(facts.member.namespace, facts.member.name) for facts in cluster.pods}
    pods = sorted(f"{namespace}/{name}" for pod in made.pods
                  if (namespace := pod["metadata"]["namespace"], name := pod["metadata"]["name"]) in present)
    if taken or pods:
        what = [f"{resource} {ns}/{name}" for resource, ns, name in taken] + [f"pod {pod}" for pod in pods]
        raise CommandError(f"{source}: {', '.join(what)} exists already, and the API server would refuse to create "
                           f"it; rename it to plan another, or ask kubectl gang why about the one that exists")


def _top(args: argparse.Namespace, now: float) -> str:
    connection, namespace = _connect(args)
    gangs, skipped = read_gangs(connection.kube, None if args.all_namespaces else [namespace])
    answer = top(gangs, now, skipped)
    return _output(args, answer, lambda: render.top_table(answer))


def _output(args: argparse.Namespace, answer: dict, table: Callable[[], str]) -> str:
    output = getattr(args, "output", "table")
    if output == "json":
        return json.dumps(answer, indent=2, ensure_ascii=False) + "\n"
    return to_yaml(answer) if output == "yaml" else table()

