"""The artifact users deploy, built once per session: the wheel from exactly the Docker build
context, installed alone in a fresh virtualenv without an index.

The fresh virtualenv gets the wheel and nothing else of this repository. Its dependencies
(Flask, the kubernetes client, …) are the ones this test environment installed, linked into a
directory on its path — every distribution of the test virtualenv except gangkeeper's own and
its harness's, so neither a checkout path nor the harness's entry points can leak in.
"""

import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.artifact.context import copy_context

REPOSITORY = Path(__file__).resolve().parents[2]
OWN_DISTRIBUTIONS = ("gangkeeper", "gangkeeper_harness", "__editable__")


@dataclass(frozen=True)
class Installed:
    wheel: Path
    context: list[str]
    python: Path
    gangkeeper: Path
    home: Path  # a working directory with nothing of the repository in it

    def run(self, *args: str, timeout: float = 60, **options) -> subprocess.CompletedProcess:
        environment = {key: value for key, value in os.environ.items()
                       if not key.startswith(("GANGKEEPER_", "PYTHON"))}
        return subprocess.run(list(args), cwd=self.home, env=environment, capture_output=True, text=True,
                              timeout=timeout, **options)


def _link_dependencies(site_packages: Path, into: Path) -> None:
    into.mkdir()
    for entry in site_packages.iterdir():
        if entry.name.lower().startswith(OWN_DISTRIBUTIONS) or entry.suffix == ".pth" or entry.name == "__pycache__":
            continue
        (into / entry.name).symlink_to(entry)


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory) -> tuple[Path, list[str]]:
    context = tmp_path_factory.mktemp("context")
    copied = copy_context(REPOSITORY, context)
    wheels = tmp_path_factory.mktemp("wheels")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--disable-pip-version-check", "--wheel-dir", str(wheels), str(context)],
                   check=True, capture_output=True, timeout=300)
    (wheel,) = wheels.glob("gangkeeper-*.whl")
    return wheel, copied


@pytest.fixture(scope="session")
def installed(built_wheel, tmp_path_factory) -> Installed:
    wheel, copied = built_wheel
    root = tmp_path_factory.mktemp("fresh")
    environment = root / "venv"
    venv.EnvBuilder(with_pip=True, symlinks=True).create(environment)
    python = environment / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
                    "--disable-pip-version-check", str(wheel)], check=True, capture_output=True, timeout=300)
    fresh_site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                     check=True, capture_output=True, text=True).stdout.strip())
    dependencies = root / "dependencies"
    _link_dependencies(Path(sysconfig.get_paths()["purelib"]), dependencies)
    (fresh_site / "test-dependencies.pth").write_text(f"{dependencies}\n")
    home = root / "home"
    home.mkdir()
    return Installed(wheel, copied, python, environment / "bin" / "gangkeeper", home)


@pytest.fixture(scope="session")
def unpacked(built_wheel, tmp_path_factory) -> Path:
    """The wheel's files, as they land in site-packages."""
    directory = tmp_path_factory.mktemp("unpacked")
    with zipfile.ZipFile(built_wheel[0]) as archive:
        archive.extractall(directory)
    return directory
