"""`gangkeeper webhook` flags: each has an environment default named in --help."""

import argparse

import pytest

from gangkeeper.webhook import cli

FLAGS = ("BIND", "PORT", "CERT_DIR", "WORKERS", "CONTROLLER_USERNAME", "AUDIT_FILE", "EXCLUDED_NAMESPACES",
         "ACCELERATORS", "MAX_BODY_BYTES")


def parse(argv):
    parser = argparse.ArgumentParser(prog="gangkeeper")
    cli.add_parser(parser.add_subparsers())
    return parser.parse_args(argv)


def test_defaults_and_lists():
    args = parse(["webhook", "--excluded-namespaces", "gangkeeper, ops", "--accelerators", "nvidia.com/gpu"])
    assert (args.port, args.workers, args.max_body_bytes) == (9443, 2, 3 * 2**20)
    assert args.excluded_namespaces == ("gangkeeper", "ops") and args.accelerators == ("nvidia.com/gpu",)
    assert args.run is cli.run


def test_flags_default_from_the_environment(monkeypatch):
    monkeypatch.setenv("GANGKEEPER_PORT", "8443")
    monkeypatch.setenv("GANGKEEPER_EXCLUDED_NAMESPACES", "a,b")
    args = parse(["webhook"])
    assert args.port == 8443 and args.excluded_namespaces == ("a", "b")


def test_help_names_every_environment_variable(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    with pytest.raises(SystemExit):
        parse(["webhook", "--help"])
    out = capsys.readouterr().out
    assert all(f"GANGKEEPER_{flag}" in out for flag in FLAGS)


def test_a_bad_value_says_what_is_accepted(capsys):
    with pytest.raises(SystemExit):
        parse(["webhook", "--workers", "0"])
    assert "a whole number from 1 to 64" in capsys.readouterr().err
