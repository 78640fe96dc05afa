"""The `gangkeeper` command imports only the subcommand asked for."""

import json
import subprocess
import sys

from gangkeeper.cli import registered_commands

PROBE = """
import json, sys
from gangkeeper.cli import build_parser
build_parser(sys.argv[1:])
print(json.dumps(sorted(name for name in sys.modules
                        if name.split(".")[0] in ("flask", "gunicorn", "kubernetes", "sim", "demo", "bench")
                        or name.startswith("gangkeeper."))))
"""


def _imported(*argv: str) -> list[str]:
    result = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def test_the_product_and_the_checkouts_harness_register_their_subcommands():
    assert list(registered_commands()) == ["bench", "certs", "controller", "demo", "sim", "webhook"]


def test_a_subcommand_imports_its_own_module_only():
    imported = _imported("certs", "issue", "--out", "x")
    assert "gangkeeper.certs.cli" in imported
    assert not [name for name in imported if name.split(".")[0] in ("flask", "gunicorn", "kubernetes", "sim")]
    assert not [name for name in imported if name.startswith(("gangkeeper.webhook", "gangkeeper.controller"))]


def test_listing_the_commands_loads_each_one():
    imported = _imported("--help")
    for module in ("gangkeeper.webhook.cli", "gangkeeper.controller.cli", "gangkeeper.certs.cli"):
        assert module in imported
