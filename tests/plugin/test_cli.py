"""The `kubectl-gang` command in-process: kubectl's flags before or after the subcommand, a table
for people and JSON or YAML for scripts, and every failure a user can fix in one line on stderr
with exit code 1 — a missing permission naming the verb and the resource, a missing kubeconfig,
an unknown pod or Gang, a bad file, an API server that does not answer."""

import io
import json
import socket

import pytest
import yaml

from gangkeeper import names
from gangkeeper.controller.reading import kube as api
from gangkeeper.plugin import cli
from gangkeeper.plugin.connect import Connection, connect, kubeconfig_path
from tests.controller.builders import pod_object
from tests.plugin.fakekube import FakeKube
from tests.plugin.world import node, running, waiting

ENFORCED = (api.NAMESPACES, {"metadata": {"name": "team", "labels": {names.ENFORCE_LABEL: names.ENFORCE_VALUE}}})
JOB = """\
apiVersion: batch/v1
kind: Job
metadata: {name: train, namespace: team}
spec:
  parallelism: 2
  template:
    spec:
      containers: [{name: main, resources: {limits: {nvidia.com/gpu: "4"}}}]
"""


@pytest.fixture
def cluster(monkeypatch):
    """The command's cluster: `cluster(objects, **fake)` makes the user's kubeconfig reach it."""
    def serve(objects, namespace="team", **fake):
        kube = FakeKube(objects, **fake)
        monkeypatch.setattr(cli, "connect", lambda kubeconfig, context: Connection(kube, namespace, "https://fake"))
        return kube
    return serve


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def failed(capsys, *argv) -> str:
    code, out, err = run(capsys, *argv)
    assert (code, out) == (1, ""), (code, out, err)
    assert err.startswith("kubectl gang: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err.removeprefix("kubectl gang: ").rstrip("\n")


def test_why_answers_as_a_table_for_people_and_alike_as_json_and_yaml(cluster, capsys):
    cluster([node("a"), *running("busy", ["a"]), *waiting("train", 2)])
    code, table, _ = run(capsys, "why", "train-0")
    assert code == 0
    assert "Verdict:    Waits\n" in table and "Constraint: nvidia.com/gpu\n" in table
    assert "CLOSEST NODE   FREE" in table and "Events:\n  <none>\n" in table
    as_json = json.loads(run(capsys, "why", "train-0", "-o", "json")[1])
    assert as_json["verdict"] == "Waits" and as_json["kind"] == "GangWhy"
    assert yaml.safe_load(run(capsys, "why", "train-0", "-o", "yaml")[1]) == as_json


def test_kubectls_flags_go_before_or_after_the_subcommand_and_the_contexts_namespace_is_the_default(cluster, capsys):
    cluster([node("a"), *waiting("train", 1, namespace="lab")], namespace="lab")
    after = run(capsys, "why", "train-0", "-n", "lab", "-o", "json")
    before = run(capsys, "-n", "lab", "-o", "json", "why", "train-0")
    unsaid = run(capsys, "why", "train-0", "-o", "json")
    assert after == before == unsaid and after[0] == 0


def test_the_controllers_flags_set_how_it_plans(cluster, capsys):
    cluster([node("a"), *running("busy", ["a"]), *waiting("train", 1, priority=5)])
    assert json.loads(run(capsys, "why", "train-0", "-o", "json")[1])["verdict"] == "Preempts"
    never = json.loads(run(capsys, "why", "train-0", "-o", "json", "--preemption", "Never")[1])
    assert never["preemption"]["reason"] == "preemption is off (the controller runs with --preemption=Never)"


def test_a_missing_permission_names_the_verb_and_the_resource(cluster, capsys):
    cluster([node("a")], forbidden={("list", "nodes", None)})
    assert failed(capsys, "why", "train-0") == ("cannot list nodes (forbidden): the plan needs to read every node; "
                                                "ask for get/list on nodes")


def test_a_pod_or_gang_that_names_no_group_says_what_it_is(cluster, capsys):
    plain = pod_object("web", gpus=0, gated=False)
    cluster([node("a"), *waiting("train", 1), (api.PODS, plain)])
    assert failed(capsys, "why", "nope") == ("no pod or Gang named nope in namespace team; name a pod of the group, its "
                                             "Gang or its group label (kubectl get gangs -n team)")
    assert failed(capsys, "why", "gang/nope") == "no Gang nope in namespace team (kubectl get gangs -n team)"
    assert failed(capsys, "why", "deploy/web") == ("deploy/web is neither a pod nor a Gang: name a pod (pod/NAME), a "
                                                   "Gang (gang/NAME) or a group label")
    assert failed(capsys, "why", "web") == (
        "pod team/web is in no group: it carries no gangkeeper.io/group label (the webhook labels and gates a "
        "training pod when it is created in a namespace labelled gangkeeper.io/enforce=true)")


def test_plan_names_the_nodes_a_job_would_take(cluster, capsys, tmp_path):
    cluster([node("a"), node("b"), *running("busy", ["a"]), ENFORCED])
    (tmp_path / "job.yaml").write_text(JOB)
    code, table, _ = run(capsys, "plan", "-f", str(tmp_path / "job.yaml"))
    assert code == 0 and "Verdict:    Fits\n" in table
    assert "NODE   PODS\nb      train-0, train-1\n" in table


def test_plan_reads_stdin_and_says_when_the_namespace_cannot_be_read(cluster, capsys, monkeypatch):
    cluster([node("a")], forbidden={("get", "namespaces", None)})
    monkeypatch.setattr("sys.stdin", io.StringIO(JOB))
    answer = json.loads(run(capsys, "plan", "-f", "-", "-o", "json")[1])
    assert answer["warnings"] == ["namespace team could not be read: the plan takes it to be enforced"]
    assert [group["group"] for group in answer["groups"]] == ["train-new"]


def test_plan_says_when_the_namespace_does_not_exist_yet(cluster, capsys, tmp_path):
    cluster([node("a")])
    (tmp_path / "job.yaml").write_text(JOB)
    answer = json.loads(run(capsys, "plan", "-f", str(tmp_path / "job.yaml"), "-o", "json")[1])
    assert answer["warnings"] == ["namespace team does not exist, and the API server refuses objects in it until it "
                                  "is created: this is the plan once it is, enforced"]
    assert "Warning: namespace team does not exist" in run(capsys, "plan", "-f", str(tmp_path / "job.yaml"))[1]


def test_an_object_the_controller_cannot_read_is_left_out_and_said_so(cluster, capsys):
    broken = pod_object("odd", gpus=8, gated=False, node_name="a", phase="Running")
    broken["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    cluster([node("a"), *waiting("train", 1), (api.PODS, broken)])
    code, out, err = run(capsys, "why", "train-0")
    assert (code, err) == (0, "")
    assert out.endswith("Not read: pods team/odd (cannot be read: quantity 'lots' is not a Kubernetes quantity (e.g. "
                        "2, 500m, 1.5, 16Gi, 512Mi, 1e3)). The answer leaves them out.\n")


def test_what_the_controllers_code_logs_is_one_line_without_its_traceback(cluster, capsys, monkeypatch):
    def cannot(*_):
        raise RuntimeError("a bug")

    monkeypatch.setattr("gangkeeper.controller.cache.index.build_groups", cannot)
    cluster([node("a"), *waiting("train", 1)])
    code, _, err = run(capsys, "why", "train-0")
    assert code == 1 and "Traceback" not in err
    assert err.splitlines()[0] == "kubectl gang: error: team/train: cannot be grouped; left out until its pods change"


def test_plan_refuses_a_workload_that_exists_already(cluster, capsys, tmp_path):
    existing = (api.RESOURCES["jobs.batch"], {"metadata": {"name": "train", "namespace": "team", "uid": "u1"},
                                              "spec": {"parallelism": 2}})
    cluster([node("a"), ENFORCED, existing])
    (tmp_path / "job.yaml").write_text(JOB)
    assert failed(capsys, "plan", "-f", str(tmp_path / "job.yaml")) == (
        f"{tmp_path / 'job.yaml'}: jobs.batch team/train exists already, and the API server would refuse to create "
        f"it; rename it to plan another, or ask kubectl gang why about the one that exists")


@pytest.mark.parametrize("text, message", [
    ("a: b: c\n", "{file} is not YAML: line 1, column 5: mapping values are not allowed here; pass a manifest as "
                  "kubectl apply -f takes it"),
    ("", "{file} holds no object; pass a manifest of the workload to plan (a Job, JobSet, PyTorchJob, ...)"),
    ("kind: ConfigMap\nmetadata: {name: c}\n", "{file} makes no pods to plan (ConfigMap c: not a workload gangkeeper "
                                               "gangs); pass a Job, JobSet, PyTorchJob, MPIJob, LeaderWorkerSet, "
                                               "RayCluster, RayJob or Pod"),
    ("kind: Job\napiVersion: batch/v1\nmetadata: {name: t}\nspec: {parallelism: x}\n",
     "{file}: document 1 (Job t) cannot be read: invalid literal for int() with base 10: 'x'; write it as its "
     "operator's API accepts it"),
], ids=["not-yaml", "empty", "no-workload", "bad-field"])
def test_a_bad_file_is_one_line_naming_it(cluster, capsys, tmp_path, text, message):
    cluster([node("a")])
    path = tmp_path / "job.yaml"
    path.write_text(text)
    assert failed(capsys, "plan", "-f", str(path)) == message.format(file=path)
    assert failed(capsys, "plan", "-f", str(tmp_path / "none.yaml")) == (
        f"cannot read {tmp_path / 'none.yaml'}: No such file or directory; pass the manifest's path with -f, or - "
        f"for stdin")


def test_a_missing_kubeconfig_is_one_line(capsys, tmp_path, monkeypatch):
    assert failed(capsys, "top", "--kubeconfig", str(tmp_path / "none")) == (
        f"kubeconfig {tmp_path / 'none'} does not exist; pass the cluster's kubeconfig with --kubeconfig (env "
        f"KUBECONFIG)")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    assert failed(capsys, "top") == (f"KUBECONFIG={tmp_path / 'none'} names no file that exists; pass the cluster's "
                                     f"kubeconfig with --kubeconfig (env KUBECONFIG), or set KUBECONFIG to an existing "
                                     f"file")


def kubeconfig(path, server, contexts):
    """A kubeconfig of one cluster and user, with `contexts` {name: namespace or None}, the first current."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": next(iter(contexts)),
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": name, "context": {"cluster": "c", "user": "u", **({"namespace": ns} if ns else {})}}
                     for name, ns in contexts.items()]}))
    return str(path)


def test_the_kubeconfig_is_found_as_kubectl_finds_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    home = str(tmp_path / ".kube" / "config")
    assert kubeconfig_path(None) == home  # absent, and no pod to fall back on: its absence is what is said
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    assert kubeconfig_path(None) is None  # in a pod: its service account
    monkeypatch.setenv("KUBECONFIG", "a:b")
    assert kubeconfig_path(None) == "a:b" and kubeconfig_path("flag") == "flag"


def test_the_namespace_is_the_contexts_as_kubectl_reads_it(tmp_path):
    path = kubeconfig(tmp_path / "config", "https://127.0.0.1:6443", {"ml": "team", "bare": None})
    assert connect(path, None).namespace == "team"
    assert connect(path, "bare").namespace == "default"
    with pytest.raises(cli.CommandError, match="context nope is not in the kubeconfig .*: bare, ml$"):
        connect(path, "nope")


def test_an_api_server_that_does_not_answer_is_one_line(capsys, tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = kubeconfig(tmp_path / "config", f"http://127.0.0.1:{port}", {"ml": "team"})
    assert failed(capsys, "top", "--kubeconfig", path) == (
        f"cannot reach the API server at 127.0.0.1:{port} (Connection refused); check the kubeconfig's server, or "
        f"pass another --context")


def test_a_usage_error_exits_2(capsys):
    with pytest.raises(SystemExit) as usage:
        cli.main(["plan"])
    assert usage.value.code == 2 and "the following arguments are required: -f/--filename" in capsys.readouterr().err
