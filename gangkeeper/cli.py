"""The `gangkeeper` command: one entry point, a subcommand per component.

Subcommands are found through the entry-point group `gangkeeper.commands`: the product registers
`webhook`, `controller` and `certs`; a checkout's development install (`harness/`) adds `sim`,
`demo` and `bench`. Each entry point names an `add_parser(subparsers)` function that registers the
subcommand and sets `run` (a function of the parsed arguments returning an exit code) on it.

Only the module of the subcommand asked for is imported, so `gangkeeper certs` pays for neither
Flask nor the harness; `gangkeeper --help` imports every registered command's `cli` module (they
import their heavy dependencies inside `run`). Flags take their defaults from `GANGKEEPER_*`
environment variables (see `gangkeeper.config.env_default`).

A failure the user can fix (a port in use, no kubeconfig, missing certificates) is raised as a
`CommandError` and ends the command with that one line on stderr and exit code 1, not a traceback.
"""

import argparse
import errno
import os
import socket
import sys
from collections.abc import Sequence
from importlib.metadata import EntryPoint, entry_points, version

from gangkeeper.config import env_name

COMMAND_GROUP = "gangkeeper.commands"
FAILED = 1  # the exit code of a CommandError; argparse's usage errors exit 2


class CommandError(Exception):
    """A failure the user can act on; its message is one line: what is wrong, then what to do."""


def one_line(error: object) -> str:
    """A library's message on one line (some span several, or end with a period)."""
    return " ".join(str(error).split()).rstrip(".")


def listen_problem(error: OSError, address: str, what: str, flag: str, env: str,
                   address_flag: str = "") -> CommandError:
    """Why `address` (HOST:PORT) could not be listened on for `what`, and which flag chooses another."""
    if error.errno == errno.EADDRNOTAVAIL or isinstance(error, socket.gaierror):
        why = "this host has no such address" if error.errno == errno.EADDRNOTAVAIL else one_line(error.strerror)
        choose = f"with {address_flag} (env {env_name(address_flag)})" if address_flag else ""
        return CommandError(f"cannot listen on {address} for {what}: {why}; choose one of this host's addresses "
                            f"{choose}".rstrip())
    if error.errno == errno.EADDRINUSE:
        why = "the port is in use by another process; stop it, or choose another port"
    elif error.errno == errno.EACCES:
        why = "permission denied (ports below 1024 need privileges); choose a port from 1024"
    else:
        why = f"{one_line(error.strerror or error)}; choose another port"
    return CommandError(f"cannot listen on {address} for {what}: {why} with {flag} (env {env})")


def check_can_listen(host: str, port: int, what: str, flag: str, env: str, address_flag: str = "") -> None:
    """Raise the CommandError of `listen_problem` unless HOST:PORT can be listened on now, before a
    server starts (gunicorn would retry a busy port five times, the controller start its caches)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do
        try:
            probe.bind((host, port))
        except OSError as error:  # socket.gaierror too: a host name that does not resolve
            raise listen_problem(error, address, what, flag, env, address_flag) from None


def credentials_problem(kubeconfig: str | None, flag: str, env: str, error: Exception,
                        in_cluster: bool = False) -> CommandError:
    """Why no cluster credentials could be loaded from `kubeconfig` (or, unset, from the pod's
    service account when `in_cluster`, else $KUBECONFIG or ~/.kube/config), and how to give them."""
    pass_one = f"pass the cluster's kubeconfig with {flag} (env {env})"
    if in_cluster and not kubeconfig:
        return CommandError(f"the pod's service account credentials are not usable ({one_line(error)}); mount its "
                            f"token (automountServiceAccountToken), or {pass_one}")
    if kubeconfig:
        if not os.path.exists(os.path.expanduser(kubeconfig)):
            return CommandError(f"kubeconfig {kubeconfig} does not exist; {pass_one}")
        return CommandError(f"kubeconfig {kubeconfig} is not usable ({one_line(error)}); {pass_one}")
    variable = os.environ.get("KUBECONFIG")
    if variable:
        files = [path for path in variable.split(os.pathsep) if path]
        if not any(os.path.exists(os.path.expanduser(path)) for path in files):
            return CommandError(f"KUBECONFIG={variable} names no file that exists; {pass_one}, or set KUBECONFIG "
                                f"to an existing file")
        return CommandError(f"the kubeconfig in KUBECONFIG={variable} is not usable ({one_line(error)}); {pass_one}")
    home = os.path.expanduser("~/.kube/config")
    if not os.path.exists(home):
        return CommandError(f"no cluster credentials: not running in a pod, KUBECONFIG is unset and {home} does not "
                            f"exist; {pass_one}, or set KUBECONFIG")
    return CommandError(f"kubeconfig {home} is not usable ({one_line(error)}); {pass_one}, or set KUBECONFIG")


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
    try:
        return args.run(args) or 0
    except CommandError as error:
        print(f"{_prog(args)}: {error}", file=sys.stderr, flush=True)
        return FAILED
    except KeyboardInterrupt:  # Ctrl-C before a command installed its own handling
        return 130


def _prog(args: argparse.Namespace) -> str:
    """`gangkeeper certs install`: the command and, for commands that have them, its subcommand."""
    words = ["gangkeeper", args.command]
    sub = getattr(args, f"{args.command}_command", None)
    return " ".join([*words, sub] if isinstance(sub, str) else words)


if __name__ == "__main__":
    # `python -m gangkeeper.cli`: run the module's importable twin, so that the errors the commands
    # raise (`CommandError`, imported from `gangkeeper.cli`) are the class `main` catches.
    from gangkeeper.cli import main as importable_main

    sys.exit(importable_main())
