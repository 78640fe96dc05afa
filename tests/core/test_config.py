import argparse

import pytest

from gangkeeper.config import add_bool_flag, add_flag, env_name, port, positive_int, positive_number


def parser_with_port():
    parser = argparse.ArgumentParser(prog="t", exit_on_error=False)
    add_flag(parser, "--port", default=9443, type=port, help="listen port")
    return parser


def test_env_names_follow_the_flag():
    assert env_name("--cert-dir") == "GANGKEEPER_CERT_DIR"


def test_flag_default_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("GANGKEEPER_PORT", "8443")
    assert parser_with_port().parse_args([]).port == 8443


def test_command_line_beats_environment(monkeypatch):
    monkeypatch.setenv("GANGKEEPER_PORT", "8443")
    assert parser_with_port().parse_args(["--port", "9000"]).port == 9000


def test_help_names_the_variable():
    assert "GANGKEEPER_PORT" in parser_with_port().format_help()


def test_bad_environment_value_names_variable_value_and_range(monkeypatch, capsys):
    monkeypatch.setenv("GANGKEEPER_PORT", "99999")
    with pytest.raises(SystemExit):
        parser_with_port()
    error = capsys.readouterr().err
    assert "GANGKEEPER_PORT='99999'" in error and "1 to 65535" in error


def test_bad_flag_value_says_what_is_accepted(capsys):
    with pytest.raises(SystemExit):
        argparse_parser = parser_with_port()
        argparse_parser.exit_on_error = True
        argparse_parser.parse_args(["--port", "http"])
    assert "'http' is not a TCP port (a whole number from 1 to 65535)" in capsys.readouterr().err


def test_positive_int_refuses_zero():
    with pytest.raises(argparse.ArgumentTypeError, match="positive"):
        positive_int("0")


def test_positive_number_takes_fractions_and_refuses_zero_words_and_infinity():
    assert positive_number("2.5") == 2.5
    for text in ("0", "-1", "soon", "inf", "nan"):
        with pytest.raises(argparse.ArgumentTypeError, match=f"'{text}' is not a positive number"):
            positive_number(text)


def test_bool_flag_from_environment(monkeypatch):
    monkeypatch.setenv("GANGKEEPER_DRY_RUN", "true")
    parser = argparse.ArgumentParser()
    add_bool_flag(parser, "--dry-run", help="change nothing")
    assert parser.parse_args([]).dry_run is True
