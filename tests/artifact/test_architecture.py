"""The architecture contracts (setup.cfg's [importlinter] sections), checked on the layout that
ships: the product's modules as the wheel installs them (`gangkeeper.webhook` and the others
live in top-level folders of the repository, which import-linter cannot map), the harness's
from the checkout; and on the checkout itself, laid out as the wheel installs it
(harness/lint_imports.py, which `make lint` runs)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.artifact.conftest import REPOSITORY

pytestmark = pytest.mark.e2e

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def test_every_import_contract_is_kept(unpacked):
    environment = {**os.environ, "PYTHONPATH": str(unpacked)}
    # Run from the unpacked wheel: import-linter puts the working directory first on the path.
    result = subprocess.run([str(LINT_IMPORTS), "--no-cache", str(REPOSITORY / "setup.cfg")],
                            cwd=unpacked, env=environment, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout
    kept = result.stdout.count(" KEPT")
    assert kept == sum(1 for line in (REPOSITORY / "setup.cfg").read_text().splitlines()
                       if line.startswith("[importlinter:contract:")), result.stdout


def test_every_import_contract_is_kept_on_the_checkout():
    result = subprocess.run([sys.executable, str(REPOSITORY / "harness" / "lint_imports.py")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout
    contracts = [line for line in (REPOSITORY / "setup.cfg").read_text().splitlines()
                 if line.startswith("[importlinter:contract:")]
    assert result.stdout.count(" KEPT") == len(contracts), result.stdout
