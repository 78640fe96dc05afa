"""The `gangkeeper` command: one entry point, a subcommand per component.

Subcommands are found through the entry-point group `gangkeeper.commands`: the product registers
`webhook`, `controller` and `certs`; a checkout's development install (`harness/`) adds `sim`,
`demo` and `bench`. Each entry point names an `add_parser(subparsers)` function that registers the
subcommand and sets `run` (a function of the parsed arguments returning an exit code) on it.

Only the module of the subcommand asked for is imported, so `gangkeeper certs` pays for neither
Flask nor the harness; `gangkeeper --help` imports every registered command's `cli` module (they
import their heavy dependencies inside `run`). Flags take their defaults from `GANGKEEPER_*`
environment variables (see `gangkeeper.config.env_default`).
"""

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import EntryPoint, entry_points, version

COMMAND_GROUP = "gangkeeper.commands"


def registered_commands() -> dict[str, EntryPoint]:
    """Every installed subcommand by name (the product's, and the harness's in a checkout)."""
    return {point.name: point for point in sorted(entry_points(group=COMMAND_GROUP), key=lambda point: point.name)}


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser for `argv`: with only the subcommand it names, or every subcommand when it names none."""
    parser = argparse.ArgumentParser(
        prog="gangkeeper",
        description="Gang scheduling for GPU training jobs on the stock kube-scheduler.",
    )
    parser.add_argument("--version", action="version", version=f"gangkeeper {version('gangkeeper')}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands = registered_commands()
    asked = next((word for word in argv if not word.startswith("-")), None)
    for name, point in commands.items():
        if asked not in commands or name == asked:
            point.load()(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    return args.run(args) or 0


if __name__ == "__main__":
    sys.exit(main())
