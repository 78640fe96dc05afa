"""What users deploy works: the wheel built from the Docker build context holds the product
alone, under one import root, and every deployed command starts from it.

`deploy/` runs three commands from the image (`gangkeeper webhook`, `gangkeeper controller`,
`gangkeeper certs install`); each is started here from the installed wheel, in a working
directory outside the repository, far enough to prove it works.
"""

import json
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
import zipfile

import pytest

from tests.recorded import ADMISSION

pytestmark = pytest.mark.e2e

PRODUCT_ROOT = "gangkeeper"
HARNESS = ("sim", "demo", "study", "reliability", "bench")
DEPLOYED_COMMANDS = ["certs", "controller", "webhook"]


def _top_level_names(wheel) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return {name.split("/", 1)[0] for name in archive.namelist()}


def test_the_build_context_is_the_product_and_its_metadata(installed):
    assert {path.split("/", 1)[0] for path in installed.context} == {
        "README.md", "LICENSE", "pyproject.toml", "setup.cfg", "gangkeeper", "webhook", "controller", "certs", "plugin"}


def test_the_wheel_carries_the_license(installed):
    with zipfile.ZipFile(installed.wheel) as archive:
        licenses = [name for name in archive.namelist() if name.endswith("/LICENSE") and ".dist-info/" in name]
        assert licenses and b"Apache License" in archive.read(licenses[0])


def test_the_wheel_installs_one_import_root(installed):
    names = _top_level_names(installed.wheel)
    assert names - {PRODUCT_ROOT} == {next(name for name in names if name.endswith(".dist-info"))}
    with zipfile.ZipFile(installed.wheel) as archive:
        files = set(archive.namelist())
    for module in ("webhook/app.py", "controller/runner.py", "certs/install.py", "plugin/cli.py", "cli.py"):
        assert f"{PRODUCT_ROOT}/{module}" in files
    assert not [name for name in files if "bench" in name or "fuzz" in name]


def test_the_wheel_carries_every_module_of_the_product(installed):
    """Each product folder's modules under the import root, its subpackages too: a package missing
    from setup.cfg's `packages` would leave its modules out of the wheel, and the command broken."""
    under_root = {"gangkeeper": "", "webhook": "webhook/", "controller": "controller/", "certs": "certs/",
                  "plugin": "plugin/"}
    modules = set()
    for path in installed.context:
        folder, _, rest = path.partition("/")
        if folder in under_root and path.endswith(".py"):
            modules.add(f"{PRODUCT_ROOT}/{under_root[folder]}{rest}")
    with zipfile.ZipFile(installed.wheel) as archive:
        files = set(archive.namelist())
    assert f"{PRODUCT_ROOT}/controller/checks/dra/allocator.py" in modules
    assert sorted(modules - files) == []


def test_no_harness_module_is_importable_beside_the_product(installed):
    probe = ("import importlib.util, json, sys; "
             "print(json.dumps({name: importlib.util.find_spec(name) is not None for name in sys.argv[1:]}))")
    result = installed.run(str(installed.python), "-c", probe, *HARNESS, "webhook", "controller", "certs",
                           "gangkeeper.webhook.app", "gangkeeper.controller.runner", check=True)
    found = json.loads(result.stdout)
    assert [name for name, present in found.items() if present] == [
        "gangkeeper.webhook.app", "gangkeeper.controller.runner"]


def test_the_command_lists_exactly_the_deployed_subcommands(installed):
    result = installed.run(str(installed.gangkeeper), "--help", check=True)
    listed = [line.split()[0] for line in result.stdout.split("positional arguments:")[1].split("options:")[0]
              .splitlines()[2:] if line.startswith("    ") and not line.startswith("      ")]
    assert listed == DEPLOYED_COMMANDS, result.stdout


@pytest.mark.parametrize("command", [["controller", "--help"], ["certs", "install", "--help"],
                                     ["webhook", "--help"]])
def test_each_deployed_command_starts(installed, command):
    result = installed.run(str(installed.gangkeeper), *command)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: gangkeeper {' '.join(command[:-1])}")


def test_kubectl_gang_is_on_path_beside_the_command_and_starts(installed):
    """kubectl finds its plugin as `kubectl-gang` on PATH: the wheel installs it as a script."""
    result = installed.run(str(installed.gangkeeper.parent / "kubectl-gang"), "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: kubectl gang ")
    for command in ("why", "plan", "top"):
        assert f"    {command} " in result.stdout


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _https(context: ssl.SSLContext, url: str, body: bytes | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, context=context, timeout=5) as answer:
        return answer.status, answer.read()


def test_the_webhook_serves_healthz_and_admissions_over_tls(installed):
    certs = installed.home / "tls"
    installed.run(str(installed.gangkeeper), "certs", "issue", "--out", str(certs), "--ip", "127.0.0.1",
                  check=True)
    port = _free_port()
    log = (installed.home / "webhook.log").open("w")
    server = subprocess.Popen([str(installed.gangkeeper), "webhook", "--bind", "127.0.0.1", "--port", str(port),
                               "--cert-dir", str(certs), "--workers", "1"],
                              cwd=installed.home, stdout=log, stderr=subprocess.STDOUT)
    context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                status, body = _https(context, f"https://127.0.0.1:{port}/healthz")
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, \
                    (installed.home / "webhook.log").read_text()[-3000:]
                time.sleep(0.1)
        assert (status, body) == (200, b"ok\n")
        recorded = json.loads((ADMISSION / "01-mutate-create-pytorch-dist-master-0.json").read_text())
        status, body = _https(context, f"https://127.0.0.1:{port}/mutate", json.dumps(recorded["review"]).encode())
        answer = json.loads(body)["response"]
        assert status == 200 and answer["allowed"] and answer["patchType"] == "JSONPatch"
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        log.close()
