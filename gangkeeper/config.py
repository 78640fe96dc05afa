"""Configuration helpers shared by every subcommand: flags whose defaults come from the environment."""

import argparse
import logging
import math
import os
from collections.abc import Callable
from typing import Any

ENV_PREFIX = "GANGKEEPER_"


def env_name(flag: str) -> str:
    """`--cert-dir` → `GANGKEEPER_CERT_DIR`."""
    return ENV_PREFIX + flag.lstrip("-").replace("-", "_").upper()


def add_flag(parser: argparse.ArgumentParser, flag: str, *, default: Any, help: str,
             type: Callable[[str], Any] = str, env: str | None = None, **kwargs: Any) -> None:
    """Add `flag` whose default is read from its environment variable, named in the help text.

    A bad value in the environment is reported like a bad flag: naming the variable, the value
    and what is accepted. An unset default (None or "") is not shown: `help` says what unset means.
    """
    variable = env or env_name(flag)
    raw = os.environ.get(variable)
    value = default
    if raw is not None:
        try:
            value = type(raw)
        except (TypeError, ValueError, argparse.ArgumentTypeError) as error:
            parser.error(f"environment variable {variable}={raw!r} is invalid: {error}")
    shown = "" if value is None or value == "" else "; default: %(default)s"
    parser.add_argument(flag, default=value, type=type, help=f"{help} (env {variable}{shown})", **kwargs)


def add_bool_flag(parser: argparse.ArgumentParser, flag: str, *, help: str, env: str | None = None) -> None:
    """A switch that is off unless given, or unless its environment variable is true/1/yes."""
    variable = env or env_name(flag)
    raw = os.environ.get(variable, "")
    if raw.lower() not in ("", "0", "false", "no", "1", "true", "yes"):
        parser.error(f"environment variable {variable}={raw!r} is invalid: write true or false")
    parser.add_argument(flag, action="store_true", default=raw.lower() in ("1", "true", "yes"),
                        help=f"{help} (env {variable})")


def int_in_range(low: int, high: int, what: str) -> Callable[[str], int]:
    """An argparse type accepting whole numbers in [low, high], saying so when given anything else."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what} (a whole number from {low} to {high})")
        return value

    parse.__name__ = what
    return parse


def positive_number(text: str) -> float:
    """An argparse type accepting a finite number above zero (seconds, a speed), saying so when given anything else."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number (e.g. 30 or 2.5)")
    return value


def one_of(*values: str) -> Callable[[str], str]:
    """An argparse type accepting only `values`, saying which when given anything else (a flag's
    `choices` are not checked on a default, and so not on one read from the environment)."""

    def parse(text: str) -> str:
        if text not in values:
            raise argparse.ArgumentTypeError(f"{text!r} is not accepted: write one of {', '.join(values)}")
        return text

    parse.__name__ = f"one of {', '.join(values)}"
    return parse


positive_int = int_in_range(1, 1_000_000, "a positive count")
port = int_in_range(1, 65535, "a TCP port")


def log_config(component: str, args: argparse.Namespace) -> None:
    """Log the resolved configuration once at start, so that every run says what it ran with."""
    settings = {key: value for key, value in sorted(vars(args).items()) if key not in ("run", "command")}
    logging.getLogger(f"gangkeeper.{component}").info("starting %s with %s", component, settings)
