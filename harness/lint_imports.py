"""Check setup.cfg's import contracts on the checkout (`make lint`).

import-linter finds a package by its import name, so it runs on the checkout laid out as the
installed distributions lay it out (staging.py): the product's folders by setup.cfg's
`package_dir`, the harness's by harness/setup.cfg's, with the repository's setup.cfg.
tests/artifact/test_architecture.py checks the same contracts on the wheel itself.

Prints what lint-imports prints; exits with its status.
"""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from staging import lay_out, package_dirs

REPOSITORY = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


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
