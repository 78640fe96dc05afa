"""The image recipe: hadolint-clean, multi-stage, and a final stage that is small, compiler-free and non-root."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.artifact.context import is_excluded, rules

REPO = Path(__file__).resolve().parents[2]
HADOLINT = Path(sys.executable).parent / "hadolint"
BUILD_TOOLS = ("gcc", "g++", "build-essential", "make", "clang", "python3-dev", "libffi-dev", "libssl-dev")


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction, continuation lines joined, comments dropped."""
    joined = text.replace("\\\n", " ")
    lines = [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "") for line in lines]


@pytest.fixture(scope="module")
def stages() -> list[list[tuple[str, str]]]:
    stages = []
    for instruction, arguments in _instructions((REPO / "Dockerfile").read_text()):
        if instruction == "FROM":
            stages.append([])
        stages[-1].append((instruction, arguments))
    return stages


def test_hadolint_finds_nothing():
    result = subprocess.run([str(HADOLINT), "--format", "json", "Dockerfile"], cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    findings = json.loads(result.stdout or "[]")
    assert result.returncode == 0 and findings == [], findings


def test_builds_wheels_in_one_stage_and_installs_them_in_another(stages):
    assert len(stages) >= 2
    builder, final = stages[0], stages[-1]
    assert builder[0][1].endswith(" AS builder")
    assert any(i == "RUN" and "pip wheel" in a for i, a in builder)
    (install,) = [a for i, a in final if i == "RUN" and "pip install" in a]
    # The wheels are bind-mounted from the builder, never copied into a layer of the final image.
    assert "--mount=type=bind,from=builder,source=/wheels" in install
    assert not any(i == "COPY" for i, a in final)
    assert "--no-cache-dir" in install and "[" not in install  # no extras such as [test] or [demo]


def test_base_images_are_pinned_python_311_slim(stages):
    for stage in stages:
        image = stage[0][1].split()[0]
        name, _, tag = image.partition(":")
        assert name == "python" and tag.startswith("3.11.") and "slim" in tag, image


def test_final_stage_runs_gangkeeper_as_an_unprivileged_user(stages):
    final = stages[-1]
    users = [a for i, a in final if i == "USER"]
    assert users and users[-1] == "65532:65532"
    assert ("ENTRYPOINT", '["gangkeeper"]') in final and ("CMD", '["webhook"]') in final
    assert ("EXPOSE", "9443") in final


def test_final_stage_has_no_build_tools(stages):
    final_text = " ".join(a for _, a in stages[-1])
    for tool in BUILD_TOOLS:
        assert f" {tool} " not in f" {final_text} ", tool
    assert not any(i == "RUN" and ("apt-get" in a or "apk " in a) for i, a in stages[-1])


def test_build_context_leaves_out_what_the_wheel_does_not_need():
    patterns = rules(REPO / ".dockerignore")
    for left_out in (".git", ".venv", "tests", "harness", "sim", "demo", "study", "reliability", "bench", "deploy",
                     "docs", "demo-timeline.png", "webhook/__pycache__/app.cpython-311.pyc"):
        assert is_excluded(left_out, patterns), left_out
    for kept in ("setup.cfg", "pyproject.toml", "README.md", "gangkeeper/cli.py", "webhook/app.py",
                 "controller/runner.py", "certs/issue.py", "plugin/cli.py", "gangkeeper/integrations/job.py"):
        assert not is_excluded(kept, patterns), kept
