"""`make lint`'s type check (harness/typecheck.py) run on a small repository of the same layout:
the repository's setup.cfg, its product folders with one module planted in webhook/. mypy runs
on the folders staged as the wheel installs them, and what it reports must name the file a
developer edits, not the staged copy."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.artifact.conftest import REPOSITORY


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """The repository's setup.cfg and type check, and an empty module in each product folder."""
    shutil.copy(REPOSITORY / "setup.cfg", tmp_path)
    (tmp_path / "harness").mkdir()
    for script in ("typecheck.py", "staging.py"):
        shutil.copy(REPOSITORY / "harness" / script, tmp_path / "harness")
    for folder in ("gangkeeper", "webhook", "controller", "certs", "plugin"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    return tmp_path


def type_check(repository: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(repository / "harness" / "typecheck.py")], cwd=repository,
                          capture_output=True, text=True, timeout=300)


def plant(repository: Path, source: str) -> None:
    (repository / "webhook" / "planted.py").write_text(source)


def test_a_type_error_fails_the_check_and_is_named_where_the_developer_edits_it(repository):
    plant(repository, "def half(count: int) -> int:\n    return count / 2\n")
    result = type_check(repository)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "webhook/planted.py:2: error: Incompatible return value type" in result.stdout
    assert "gangkeeper/webhook/planted.py" not in result.stdout, "the staged copy is not what a developer opens"


def test_the_repositorys_settings_apply_a_function_without_annotations_is_an_error(repository):
    plant(repository, "def half(count):\n    return count // 2\n")
    result = type_check(repository)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "webhook/planted.py:1: error: Function is missing a type annotation  [no-untyped-def]" in result.stdout


def test_a_well_typed_product_passes(repository):
    plant(repository, "def half(count: int) -> int:\n    return count // 2\n")
    result = type_check(repository)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("Success: no issues found")
