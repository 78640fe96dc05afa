"""The flag tables in docs/configuration.md are the commands' flags: every flag a command takes
is in its table, with its environment variable, and the table names no flag the command does not
take."""

import re
from pathlib import Path

import pytest

from gangkeeper.cli import build_parser
from gangkeeper.config import env_name

CONFIGURATION = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def table_of(command: str) -> dict[str, str]:
    """`--flag` → its env column, from the table under `## \\`gangkeeper COMMAND\\``."""
    text = CONFIGURATION.read_text()
    section = text.split(f"## `gangkeeper {command}`", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| `--") and len(cells) >= 2:
            flags = re.findall(r"`(--[a-z-]+)`", cells[0])
            envs = re.findall(r"`([A-Z_]+)`", cells[1])
            rows.update(zip(flags, envs or [""] * len(flags), strict=False))
    return rows


def flags_of(command: str) -> set[str]:
    parser = build_parser([command])
    sub = next(action for action in parser._actions if action.dest == "command").choices[command]
    return {option for action in sub._actions for option in action.option_strings
            if option.startswith("--") and option != "--help"}


@pytest.mark.parametrize("command", ["controller", "webhook"])
def test_the_configuration_table_lists_exactly_the_flags_with_their_environment_variables(command):
    table = table_of(command)
    assert set(table) == flags_of(command)
    assert {flag: env for flag, env in table.items() if env != env_name(flag)} == {}
