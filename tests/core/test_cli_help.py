"""`--help` is written for the user: a description of what the command does, and defaults that read
as values (issue 14: not `default: )`, `default: None`, nor the module docstring for developers)."""

import subprocess
import sys

import pytest

from gangkeeper.cli import main

COMMANDS = [["controller"], ["webhook"], ["certs"], ["certs", "issue"], ["certs", "install"], ["sim"],
            ["sim", "serve"], ["bench"]]


def help_text(argv, capsys, monkeypatch) -> str:
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_help_describes_the_command_and_shows_readable_defaults(argv, capsys, monkeypatch):
    text = help_text(argv, capsys, monkeypatch)
    usage, _, rest = text.partition("\n\n")
    description = rest.split("\n\n")[0]
    assert usage.startswith(f"usage: gangkeeper {' '.join(argv)} ")
    assert not description.startswith(("options:", "positional arguments:")), f"no description:\n{text}"
    # `None` is a value of one flag (--capacity-provisioning), where it reads as a choice, not as unset.
    choice = "GANGKEEPER_CAPACITY_PROVISIONING; default: None"
    assert "default: )" not in text and "default: None" not in " ".join(text.split()).replace(choice, "")
    # What the docstrings for developers say (module names, how the code is laid out), a user has no use for.
    assert ".py" not in description and "`gangkeeper certs issue|install`: flags" not in description


def test_the_controller_says_where_audit_and_log_lines_go(capsys, monkeypatch):
    text = " ".join(help_text(["controller"], capsys, monkeypatch).split())
    assert "Audit lines (one JSON object per decision) go to stdout, or to --audit-file; log lines go to stderr" in text
    assert "audit log file, size-rotated; stdout when unset (env GANGKEEPER_AUDIT_FILE)" in text


def test_list_defaults_wrap_between_their_items(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    with pytest.raises(SystemExit):
        main(["webhook", "--help"])
    text = capsys.readouterr().out
    assert "default: nvidia.com/gpu, amd.com/gpu," in " ".join(text.split())
    assert "haba\n" not in text


def test_the_installed_command_prints_the_same_help():
    result = subprocess.run([sys.executable, "-m", "gangkeeper.cli", "certs", "--help"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0 and "The TLS certificate the API server checks" in result.stdout
