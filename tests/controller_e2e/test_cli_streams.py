"""One output stream per purpose (issue 14): the controller's audit lines on stdout, its log lines on
stderr, and a decision said once: in the audit line, not again in the log. The installed command,
against the emulation."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.controller_e2e.emulation import Emulation, member, node, pytorchjob

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent / "gangkeeper"


def test_audit_lines_go_to_stdout_and_log_lines_to_stderr(tmp_path):
    emulation = Emulation(tmp_path)
    try:
        emulation.api.create("nodes", node("n0"))
        job, _ = pytorchjob(emulation, "job", 0)
        member(emulation, job, 0)
        kubeconfig, _ = emulation.kubeconfig()
        result = subprocess.run([str(BIN), "controller", "--once", "--kubeconfig", str(kubeconfig)],
                                capture_output=True, text=True, timeout=120)
    finally:
        emulation.close()
    assert result.returncode == 0, result.stderr
    audit = [json.loads(line) for line in result.stdout.splitlines()]  # every line of stdout is an audit line
    assert [(line["component"], line["event"]) for line in audit] == [("controller", "gang.reserved")]
    logged = result.stderr.splitlines()
    assert logged and not [line for line in logged if line.startswith("{")], "no audit line on stderr"
    assert not any("gang.reserved" in line for line in logged), "the decision is said once, in the audit line"
