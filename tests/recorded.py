"""Recordings from a real control plane (v1.36.2), carried in the repository (`tests/fixtures/`)
so that a fresh clone tests itself with nothing beside it. `tests/test_fixture_copies.py` fails
when `shared/fixtures/` beside the repository holds a newer recording than these copies."""

from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
RECORDED = FIXTURES / "kube-apiserver-v1.36"
ADMISSION = RECORDED / "admission"
API = RECORDED / "api"
SCHEDULER = FIXTURES / "kube-scheduler-v1.36"
CONTROLLER_MANAGER = FIXTURES / "kube-controller-manager-v1.36"
