"""`gangkeeper sim serve`, the playground, as a new user runs it from the repository root.

It is started as a subprocess on a free port with a work directory; its printed kubeconfig and
three commands are run as printed, with the venv's real kubectl: nodes, then the example Job (2
pods × 4 GPUs in an enforced namespace), whose pods a `kubectl get pods -w` sees SchedulingGated
and then Running, then the Gangs. gangkeeper was installed as deploy/ installs it: the namespace,
the TLS Secret and both caBundles written by `gangkeeper certs install`, a controller that logs no
404. SIGINT stops it with exit code 0 and no child left running; every file it wrote is in the
work directory, none in the repository. A busy port is refused in one line, before anything is
written; `--bare` serves the cluster alone, its files in the work directory too.
"""

import queue
import re
import shlex
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from demo.processes import free_port
from gangkeeper import names
from sim.deployed import REPOSITORY
from tests.sim_cluster.playground import GANGKEEPER, Served, line_after

pytestmark = pytest.mark.e2e

KUBECTL = Path(sys.executable).parent / "kubectl"
LEFTOVERS = ("sim-tls", "sim.kubeconfig", "sim.kubeconfig.controller")


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (from /proc: a child's parent is the 4th field of its stat)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def run(command: str, timeout: float = 30) -> str:
    result = subprocess.run(shlex.split(command), cwd=REPOSITORY, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{command}: {result.stderr}"
    return result.stdout


def present(root: Path) -> set[str]:
    return {name for name in LEFTOVERS if (root / name).exists()}


def test_the_playground_serves_gangkeeper_to_kubectl_and_stops_with_everything(tmp_path):
    left_before = present(REPOSITORY)
    work = tmp_path / "work"
    served = Served(tmp_path, "--port", str(free_port()), "--nodes", "2", "--work-dir", str(work))
    try:
        banner = served.banner()
        assert banner[0].startswith("emulated cluster at https://127.0.0.1:") and "gangkeeper installed" in banner[0]
        assert line_after(banner, "work dir:").startswith(f"{work} ")
        kubeconfig = Path(line_after(banner, "kubeconfig:"))
        assert kubeconfig.parent == work and kubeconfig.exists()
        commands = banner[banner.index("try:") + 1:-1]
        assert len(commands) == 3 and all(c.startswith(f"  .venv/bin/kubectl --kubeconfig {kubeconfig} ")
                                          for c in commands), commands
        children = descendants(served.process.pid)
        pids = {int(pid) for pid in re.findall(r"pid (\d+)", "\n".join(banner))}
        assert len(pids) == 2 and pids <= children, (pids, children)  # the webhook and the controller

        nodes = run(commands[0])
        assert nodes.split()[:5] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"] and nodes.count(" Ready ") == 2
        watch = subprocess.Popen([*shlex.split(commands[2].split(" get ")[0]), "get", "pods", "-n", "ml-training",
                                  "-w"], cwd=REPOSITORY, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(1)  # the watch is open before the pods exist
            assert run(commands[1]).split() == ["namespace/ml-training", "created", "job.batch/train", "created"]
            statuses = pod_statuses(watch, until={"Running", "Completed"}, timeout=30)
        finally:
            watch.kill()
            watch.wait()
        assert len(statuses) == 2, statuses
        for pod, seen in statuses.items():
            assert seen[0] == "SchedulingGated" and seen[-1] in ("Running", "Completed"), (pod, seen)
        gangs = run(commands[2])
        gang = next(line for line in gangs.splitlines() if line.startswith("gang.gangkeeper.io/train-"))
        assert gang.split()[1:3] == ["Running", "Bound"], gangs

        kubectl = [str(KUBECTL), "--kubeconfig", str(kubeconfig)]
        secret_type = run(shlex.join([*kubectl, "get", "secret", names.WEBHOOK_TLS_SECRET, "-n",
                                      names.DEFAULT_NAMESPACE, "-o", "jsonpath={.type}"]))
        assert secret_type == "kubernetes.io/tls"
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            bundle = run(shlex.join([*kubectl, "get", kind, names.WEBHOOK_CONFIGURATION, "-o",
                                     "jsonpath={.webhooks[0].clientConfig.caBundle}"]))
            assert len(bundle) > 100, kind
        assert "caBundle patched" in (work / "certs-install.log").read_text()
    finally:
        code = served.stop()

    assert code == 0, served.stderr_path.read_text()
    assert children and not [pid for pid in children if running(pid)], "a child outlived sim serve"
    controller_log = (work / "controller.log").read_text()
    assert "now leads" in controller_log
    assert not re.search(r'\b404\b|namespaces "gangkeeper" not found', controller_log), controller_log
    for name in ("kubeconfig", "kubeconfig.controller", "apiserver-tls/ca.crt", "webhook-tls/tls.crt",
                 "webhook.log", "controller.log", "certs-install.log"):
        assert (work / name).is_file(), name
    assert present(REPOSITORY) <= left_before, "sim serve wrote into the repository"


def pod_statuses(watch: subprocess.Popen, *, until: set[str], timeout: float) -> dict[str, list[str]]:
    """The STATUS column a `kubectl get pods -w` printed for each pod, in order, until every pod's is in `until`."""
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in watch.stdout] and lines.put(None),
                     daemon=True).start()
    seen: dict[str, list[str]] = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        if line is None:
            break
        cells = line.split()
        if cells[0] == "NAME":
            continue
        statuses = seen.setdefault(cells[0], [])
        if not statuses or statuses[-1] != cells[2]:
            statuses.append(cells[2])
        if len(seen) == 2 and all(s[-1] in until for s in seen.values()):
            return seen
    pytest.fail(f"pods not {until} within {timeout} s: {seen}")


def test_a_busy_port_is_refused_in_one_line_before_anything_is_written(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run([str(GANGKEEPER), "sim", "serve", "--port", str(port),
                                 "--work-dir", str(tmp_path / "work")], cwd=REPOSITORY, capture_output=True,
                                text=True, timeout=30)
    assert result.returncode != 0 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"127.0.0.1:{port}" in result.stderr and "--port" in result.stderr, result.stderr
    assert not (tmp_path / "work").exists()


def test_bare_serves_the_cluster_alone_its_files_in_the_work_directory(tmp_path):
    left_before = present(REPOSITORY)
    work = tmp_path / "work"
    served = Served(tmp_path, "--bare", "--tls", "--port", str(free_port()), "--nodes", "1", "--work-dir", str(work))
    try:
        banner = served.banner()
        assert banner[0].startswith("emulated cluster at https://127.0.0.1:") and "gangkeeper" not in banner[0]
        kubeconfig = Path(line_after(banner, "kubeconfig:"))
        assert kubeconfig == work / "kubeconfig"
        assert f"  gangkeeper controller --kubeconfig {kubeconfig}.controller" in banner
        namespaces = run(shlex.join([str(KUBECTL), "--kubeconfig", str(kubeconfig), "get", "namespaces", "-o",
                                     "name"]))
        assert f"namespace/{names.DEFAULT_NAMESPACE}" not in namespaces.split()
        assert not descendants(served.process.pid)
    finally:
        assert served.stop() == 0
    assert (work / "apiserver-tls" / "ca.crt").is_file() and (work / "kubeconfig.controller").is_file()
    assert present(REPOSITORY) <= left_before
