"""The `gangkeeper` command: one entry point, a subcommand per component.

Each component module exposes `add_parser(subparsers)`, which registers its subcommand and sets
`run` (a function of the parsed arguments returning an exit code) on it. Flags take their
defaults from `GANGKEEPER_*` environment variables (see `gangkeeper.config.env_default`).
"""

import argparse
import importlib
import sys
from importlib.metadata import version

# Imported lazily so that `gangkeeper certs` does not pay for Flask, nor `webhook` for the client.
SUBCOMMANDS = (
    "webhook.cli",
    "certs.cli",
    "controller.cli",
    "sim.cli",
    "bench.cli",
    "demo.cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gangkeeper",
        description="Gang scheduling for GPU training jobs on the stock kube-scheduler.",
    )
    parser.add_argument("--version", action="version", version=f"gangkeeper {version('gangkeeper')}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in SUBCOMMANDS:
        importlib.import_module(module).add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    return args.run(args) or 0


if __name__ == "__main__":
    sys.exit(main())
