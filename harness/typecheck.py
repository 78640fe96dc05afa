"""Check the product's types on the checkout with mypy and setup.cfg's `[mypy]` settings (`make lint`).

mypy finds a package by its import name, so it runs on the checkout laid out as the wheel installs
it (staging.py). It names the staged copies, so each location it prints is mapped back to the
repository's file, relative to the working directory: `controller/cache/index.py:132: error: …`
opens the file to edit, not the copy. The tree is staged anew on each run, always at the same
place, build/typecheck/tree, with mypy's cache beside it: mypy keeps a module's reports in its
cache under the path it checked, so a tree staged at a new place each time would be named by
the reports of every module that had not changed. A run after a small change takes a second.

Prints what mypy prints; exits with its status.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from staging import lay_out, package_dirs, repository_file

REPOSITORY = Path(__file__).resolve().parents[1]
STAGED = REPOSITORY / "build" / "typecheck"
# A location at the start of a report's line: `/tmp/…/gangkeeper/webhook/app.py:12: error: …`.
LOCATION = re.compile(r"^(?P<path>[^:\n]+\.pyi?)(?=:\d)", re.MULTILINE)


def readable(report: str, folders: dict[str, Path], tree: Path) -> str:
    """mypy's report with each staged file's location replaced by its repository file's."""
    def located(match: re.Match[str]) -> str:
        found = repository_file(Path(match["path"]), folders, tree)
        return match["path"] if found is None else os.path.relpath(found)
    return LOCATION.sub(located, report)


def main() -> int:
    folders, tree = package_dirs(REPOSITORY / "setup.cfg"), STAGED / "tree"
    shutil.rmtree(tree, ignore_errors=True)
    lay_out(folders, tree)
    # Run from the tree: mypy finds `packages` (setup.cfg) in the working directory.
    result = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(REPOSITORY / "setup.cfg"),
                             "--cache-dir", str(STAGED / "mypy_cache"), "--show-absolute-path"],
                            cwd=tree, capture_output=True, text=True)
    sys.stdout.write(readable(result.stdout, folders, tree))
    sys.stderr.write(readable(result.stderr, folders, tree))
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
