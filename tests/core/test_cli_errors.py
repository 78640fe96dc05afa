"""What a user can fix ends the command in one line on stderr, exit code 1, no traceback (issue 14):
a port in use, no kubeconfig, missing certificates, a directory or audit file that cannot be written.

Each case runs the real entry point, `gangkeeper.cli.main([...])`; a few run the installed command
in a process of its own, where a traceback would show."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gangkeeper.cli import main

BIN = Path(sys.executable).parent / "gangkeeper"


@pytest.fixture(autouse=True)
def no_credentials(monkeypatch, tmp_path):
    """No kubeconfig anywhere and not in a pod; no GANGKEEPER_* setting from the environment."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for variable in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(variable, raising=False)
    for variable in [name for name in os.environ if name.startswith("GANGKEEPER_")]:
        monkeypatch.delenv(variable)


@pytest.fixture()
def busy_port():
    """A port another process (here: a socket) listens on, on every address."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("0.0.0.0", 0))
        listener.listen()
        yield listener.getsockname()[1]


@pytest.fixture()
def kubeconfig(tmp_path) -> Path:
    """A valid kubeconfig (nothing listens at its server: loading it contacts nobody)."""
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return path


@pytest.fixture()
def certs(tmp_path) -> Path:
    directory = tmp_path / "tls"
    assert main(["certs", "issue", "--out", str(directory)]) == 0
    return directory


def failed(argv: list[str], capsys) -> str:
    """The one line `argv` ends with on stderr, having asserted exit code 1."""
    capsys.readouterr()
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.endswith("\n") and err.count("\n") == 1, err
    return err.rstrip("\n")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# --- gangkeeper webhook ----------------------------------------------------------------------------

def test_webhook_without_a_certificate_directory(capsys, tmp_path):
    missing = tmp_path / "nowhere"
    assert failed(["webhook", "--cert-dir", str(missing), "--port", str(free_port())], capsys) == (
        f"gangkeeper webhook: certificate directory {missing} does not exist; write them with "
        f"`gangkeeper certs issue --out {missing}`, or pass the directory that holds them with --cert-dir "
        f"(env GANGKEEPER_CERT_DIR)")


def test_webhook_with_a_certificate_directory_missing_its_key(capsys, certs):
    (certs / "tls.key").unlink()
    assert failed(["webhook", "--cert-dir", str(certs), "--port", str(free_port())], capsys).startswith(
        f"gangkeeper webhook: no tls.key in {certs}; write them with `gangkeeper certs issue --out {certs}`")


def test_webhook_with_files_that_are_no_certificate(capsys, certs):
    (certs / "tls.crt").write_text("not a certificate\n")
    assert failed(["webhook", "--cert-dir", str(certs), "--port", str(free_port())], capsys).startswith(
        f"gangkeeper webhook: tls.crt and tls.key in {certs} are not a certificate and its key (")


def test_webhook_on_a_port_in_use(capsys, certs, busy_port):
    assert failed(["webhook", "--cert-dir", str(certs), "--port", str(busy_port)], capsys) == (
        f"gangkeeper webhook: cannot listen on 0.0.0.0:{busy_port} for the webhook: the port is in use by another "
        f"process; stop it, or choose another port with --port (env GANGKEEPER_PORT)")


def test_webhook_on_an_address_this_host_does_not_have(capsys, certs):
    line = failed(["webhook", "--cert-dir", str(certs), "--bind", "192.0.2.1", "--port", str(free_port())], capsys)
    assert line.endswith("this host has no such address; choose one of this host's addresses with --bind "
                         "(env GANGKEEPER_BIND)")


def test_webhook_with_an_audit_file_it_cannot_write(capsys, certs, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert failed(["webhook", "--cert-dir", str(certs), "--port", str(free_port()), "--audit-file",
                   str(blocker / "audit.log")], capsys).startswith(
        f"gangkeeper webhook: cannot write the audit log {blocker / 'audit.log'}: ")


# --- gangkeeper controller -------------------------------------------------------------------------

def test_controller_without_any_kubeconfig(capsys, tmp_path):
    assert failed(["controller", "--once"], capsys) == (
        f"gangkeeper controller: no cluster credentials: not running in a pod, KUBECONFIG is unset and "
        f"{tmp_path / 'home' / '.kube' / 'config'} does not exist; pass the cluster's kubeconfig with --kubeconfig "
        f"(env GANGKEEPER_KUBECONFIG), or set KUBECONFIG")


def test_controller_with_a_kubeconfig_that_does_not_exist(capsys, tmp_path):
    assert failed(["controller", "--once", "--kubeconfig", str(tmp_path / "none")], capsys) == (
        f"gangkeeper controller: kubeconfig {tmp_path / 'none'} does not exist; pass the cluster's kubeconfig with "
        f"--kubeconfig (env GANGKEEPER_KUBECONFIG)")


def test_controller_with_a_kubeconfig_that_is_not_one(capsys, tmp_path):
    (tmp_path / "empty").write_text("{}\n")
    assert failed(["controller", "--once", "--kubeconfig", str(tmp_path / "empty")], capsys).startswith(
        f"gangkeeper controller: kubeconfig {tmp_path / 'empty'} is not usable (Invalid kube-config file.")


def test_controller_with_kubeconfig_naming_no_file(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    assert failed(["controller", "--once"], capsys).startswith(
        f"gangkeeper controller: KUBECONFIG={tmp_path / 'none'} names no file that exists; ")


def test_controller_in_a_pod_without_its_token(capsys, monkeypatch):
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    assert failed(["controller", "--once"], capsys).startswith(
        "gangkeeper controller: the pod's service account credentials are not usable (")


@pytest.mark.parametrize("flag, what", [("--health-port", "/healthz and /readyz"), ("--metrics-port", "/metrics")])
def test_controller_on_a_port_in_use(capsys, kubeconfig, busy_port, flag, what):
    other = "--metrics-port" if flag == "--health-port" else "--health-port"
    line = failed(["controller", "--kubeconfig", str(kubeconfig), flag, str(busy_port), other, str(free_port())],
                  capsys)
    env = "GANGKEEPER_" + flag[2:].replace("-", "_").upper()
    assert line == (f"gangkeeper controller: cannot listen on 0.0.0.0:{busy_port} for {what}: the port is in use by "
                    f"another process; stop it, or choose another port with {flag} (env {env})")


def test_controller_with_an_audit_file_it_cannot_write(capsys, kubeconfig, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert failed(["controller", "--once", "--kubeconfig", str(kubeconfig), "--audit-file",
                   str(blocker / "audit.log")], capsys).startswith(
        f"gangkeeper controller: cannot write the audit log {blocker / 'audit.log'}: ")


# --- gangkeeper certs ------------------------------------------------------------------------------

def test_certs_install_without_any_kubeconfig(capsys, tmp_path):
    assert failed(["certs", "install", "--dir", str(tmp_path / "tls")], capsys).startswith(
        "gangkeeper certs install: no cluster credentials: not running in a pod, KUBECONFIG is unset and ")


def test_certs_install_with_a_kubeconfig_that_does_not_exist(capsys, tmp_path):
    assert failed(["certs", "install", "--dir", str(tmp_path / "tls"), "--kubeconfig", str(tmp_path / "none")],
                  capsys) == (f"gangkeeper certs install: kubeconfig {tmp_path / 'none'} does not exist; pass the "
                              f"cluster's kubeconfig with --kubeconfig (env GANGKEEPER_CERTS_KUBECONFIG)")


def test_certs_install_with_no_api_server_behind_its_kubeconfig(capsys, tmp_path, kubeconfig):
    assert failed(["certs", "install", "--dir", str(tmp_path / "tls"), "--kubeconfig", str(kubeconfig)],
                  capsys).startswith("gangkeeper certs install: cannot reach the API server (")


@pytest.mark.parametrize("argv, flag, env", [
    (["certs", "issue", "--out"], "--out", "GANGKEEPER_CERTS_OUT"),
    (["certs", "install", "--dir"], "--dir", "GANGKEEPER_CERTS_DIR"),
])
def test_certs_into_a_directory_that_cannot_be_made(capsys, tmp_path, kubeconfig, argv, flag, env):
    blocker = tmp_path / "file"
    blocker.write_text("")
    extra = ["--kubeconfig", str(kubeconfig)] if "install" in argv else []
    line = failed([*argv, str(blocker / "tls"), *extra], capsys)
    assert line.startswith(f"{' '.join(['gangkeeper', *argv[:2]])}: cannot write to {blocker / 'tls'}: ")
    assert line.endswith(f"; pass a directory you can write with {flag} (env {env})")


# --- the installed command, in a process of its own ------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["webhook", "--cert-dir", "{tmp}/nowhere"],
    ["controller", "--once", "--kubeconfig", "{tmp}/nowhere"],
    ["certs", "install", "--dir", "{tmp}/tls"],  # and no kubeconfig
], ids=["webhook", "controller", "certs"])
def test_the_command_prints_one_line_and_no_traceback(argv, tmp_path):
    argv = [word.format(tmp=tmp_path) for word in argv]
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    result = subprocess.run([str(BIN), *argv], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith(f"gangkeeper {' '.join(argv[:2]) if argv[0] == 'certs' else argv[0]}: ")
