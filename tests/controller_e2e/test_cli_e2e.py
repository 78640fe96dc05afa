"""`gangkeeper controller` as a user runs it: flags in, the emulated API server over HTTP behind."""

import http.client
import json
import threading

import pytest

from demo.processes import free_port
from gangkeeper import names
from gangkeeper.cli import build_parser, main
from tests.controller_e2e.emulation import NS, Emulation, eventually, member, node, pytorchjob, released

pytestmark = pytest.mark.e2e


@pytest.fixture()
def emulation(tmp_path):
    emulation = Emulation(tmp_path)
    emulation.api.create("nodes", node("n0"))
    job, _ = pytorchjob(emulation, "job", 0)
    member(emulation, job, 0)
    yield emulation
    emulation.close()


def get(port: int, path: str) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    connection.request("GET", path)
    response = connection.getresponse()
    return response.status, response.read().decode()


def audit_lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_once_syncs_runs_one_pass_and_exits(emulation, tmp_path):
    kubeconfig, _ = emulation.kubeconfig()
    audit = tmp_path / "audit.jsonl"
    assert main(["controller", "--once", "--kubeconfig", str(kubeconfig), "--audit-file", str(audit)]) == 0
    pod = emulation.pods()["job-0"]
    assert emulation.reserved_nodes() == {"job-0": "n0"}
    assert not released(pod), "one pass reserves; the next would release"
    assert [line["event"] for line in audit_lines(audit)] == ["gang.reserved"]


def test_dry_run_decides_and_audits_but_writes_nothing(emulation, tmp_path):
    kubeconfig, _ = emulation.kubeconfig()
    audit = tmp_path / "audit.jsonl"
    before = emulation.api.store.resource_version
    assert main(["controller", "--once", "--dry-run", "--kubeconfig", str(kubeconfig), "--audit-file",
                 str(audit)]) == 0
    assert emulation.api.store.resource_version == before, "no object was written"
    (line,) = audit_lines(audit)
    assert line["event"] == "gang.reserved" and line["details"]["dry_run"] is True


def test_serving_leads_probes_and_exports_metrics_then_hands_the_lease_back(emulation, tmp_path):
    kubeconfig, _ = emulation.kubeconfig()
    health, metrics = free_port(), free_port()
    args = build_parser().parse_args([
        "controller", "--kubeconfig", str(kubeconfig), "--health-port", str(health), "--metrics-port", str(metrics),
        "--audit-file", str(tmp_path / "audit.jsonl"), "--identity", "replica-0"])
    stop = threading.Event()
    serving = threading.Thread(target=args.run, args=(args, stop), daemon=True)
    serving.start()
    try:
        eventually(lambda: _answers(health, "/readyz") == 200, what="/readyz")
        assert get(health, "/healthz") == (200, "ok\n") and get(health, "/nope")[0] == 404
        eventually(lambda: released(emulation.pods()["job-0"]))
        lease = emulation.api.get("leases", names.CONTROLLER_LEASE, namespace=names.DEFAULT_NAMESPACE)
        assert lease["spec"]["holderIdentity"] == "replica-0"
        exported = eventually(lambda: _metrics_after_release(metrics), what="metrics of the release")
        for family in ("gangkeeper_complete_to_released_seconds", "gangkeeper_reserved_accelerators",
                       "gangkeeper_rollbacks_total", "gangkeeper_reconcile_pass_seconds",
                       "gangkeeper_watch_restarts_total", "gangkeeper_index_inconsistencies_total"):
            assert f"# TYPE {family}" in exported, family
        assert f'gangkeeper_groups{{namespace="{NS}",phase="Admitted"}} 1.0' in exported
    finally:
        stop.set()
        serving.join(10)
    assert not serving.is_alive()
    lease = emulation.api.get("leases", names.CONTROLLER_LEASE, namespace=names.DEFAULT_NAMESPACE)
    assert lease["spec"]["holderIdentity"] == "", "a clean stop hands the lease back"
    assert emulation.api.list("gangs", namespace=NS)


def _answers(port: int, path: str) -> int | None:
    try:
        return get(port, path)[0]
    except OSError:
        return None


def _metrics_after_release(port: int) -> str | None:
    status, text = get(port, "/metrics")
    return text if status == 200 and "gangkeeper_complete_to_released_seconds_count 1.0" in text else None
