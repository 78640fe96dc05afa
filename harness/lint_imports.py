"""Check setup.cfg's import contracts on the checkout (`make lint`).

import-linter finds a package by its import name, and on a checkout `gangkeeper.webhook`,
`gangkeeper.controller` and `gangkeeper.certs` live in top-level folders that only the installed
distribution maps under `gangkeeper` (setup.cfg's `package_dir`). So the folders are copied into a
temporary directory as the installed tree lays them out — the product's by setup.cfg's
`package_dir`, the harness's by harness/setup.cfg's — and lint-imports runs there with the
repository's setup.cfg. Copies, not symlinks: import-linter does not walk into a linked folder.
tests/artifact/test_architecture.py checks the same contracts on the wheel itself.

Prints what lint-imports prints; exits with its status.
"""

import configparser
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def package_dirs(setup_cfg: Path) -> dict[str, Path]:
    """Import name → folder, from a setup.cfg's `[options] package_dir` (paths relative to it)."""
    parser = configparser.ConfigParser()
    parser.read(setup_cfg)
    folders = {}
    for line in parser["options"]["package_dir"].strip().splitlines():
        name, _, folder = (part.strip() for part in line.partition("="))
        folders[name] = (setup_cfg.parent / folder).resolve()
    return folders


def lay_out(folders: dict[str, Path], into: Path) -> None:
    """Each folder copied to where its import name puts it (parents first: `gangkeeper` before
    `gangkeeper.webhook`), without caches."""
    for name in sorted(folders, key=lambda name: name.count(".")):
        shutil.copytree(folders[name], into.joinpath(*name.split(".")), dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="gangkeeper-contracts-") as tree:
        lay_out({**package_dirs(REPOSITORY / "setup.cfg"), **package_dirs(REPOSITORY / "harness" / "setup.cfg")},
                Path(tree))
        # Run from the tree: import-linter puts the working directory first on the path.
        environment = {**os.environ, "PYTHONPATH": tree}
        return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo", str(REPOSITORY / "setup.cfg")], cwd=tree,
                              env=environment).returncode


if __name__ == "__main__":
    sys.exit(main())
