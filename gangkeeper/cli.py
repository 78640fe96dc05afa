"""The `gangkeeper` command: one entry point, a subcommand per component."""

import argparse
import sys
from importlib.metadata import version


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gangkeeper", description=__doc__)
    parser.add_argument("--version", action="version", version=f"gangkeeper {version('gangkeeper')}")
    parser.add_subparsers(dest="command", metavar="COMMAND")
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
