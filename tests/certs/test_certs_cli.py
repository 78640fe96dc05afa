"""The `certs` subcommands as a user meets them: flags, environment defaults, errors that say what to write."""

import argparse
import stat

import pytest

from gangkeeper.certs import cli


def _parse(argv):
    parser = argparse.ArgumentParser(prog="gangkeeper")
    cli.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_issue_writes_the_files(tmp_path, capsys):
    args = _parse(["certs", "issue", "--out", str(tmp_path), "--dns", "a.example.com,b.example.com",
                   "--dns", "c.example.com", "--ip", "10.0.0.1"])
    assert args.dns == ["a.example.com", "b.example.com", "c.example.com"]
    assert args.run(args) == 0
    assert stat.S_IMODE((tmp_path / "tls.key").stat().st_mode) == 0o600
    assert "gangkeeper-webhook.gangkeeper.svc" in capsys.readouterr().out


def test_install_flags_default_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("GANGKEEPER_CERTS_DIR", str(tmp_path))
    monkeypatch.setenv("GANGKEEPER_CERTS_SECRET", "other-tls")
    monkeypatch.setenv("GANGKEEPER_CERTS_RENEW_BEFORE_FRACTION", "0.5")
    args = _parse(["certs", "install"])
    assert (args.dir, args.secret, args.renew_before_fraction) == (tmp_path, "other-tls", 0.5)
    assert _parse(["certs", "install", "--secret", "flag-tls"]).secret == "flag-tls"


def test_help_names_every_environment_variable(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    with pytest.raises(SystemExit):
        _parse(["certs", "install", "--help"])
    out = capsys.readouterr().out
    for variable in ("DIR", "NAMESPACE", "SECRET", "SERVICE", "MUTATING", "VALIDATING", "KUBECONFIG",
                     "RENEW_BEFORE_FRACTION", "DAYS"):
        assert f"(env GANGKEEPER_CERTS_{variable};" in out or f"(env GANGKEEPER_CERTS_{variable})" in out
    assert "default: None" not in out and "default: )" not in out


@pytest.mark.parametrize(("argv", "message"), [
    (["--ip", "1.2.3"], "argument --ip: '1.2.3' is not an IP address: write one like"),
    (["--dns", "Bad_Name"], "argument --dns: 'Bad_Name' is not a DNS name: use dot-separated labels"),
    (["--days", "0"], "argument --days: '0' is not a validity in days (a whole number from 1 to 3650)"),
    (["--service", "web.hook"], "argument --service: 'web.hook' is not a DNS label"),
])
def test_issue_errors_name_the_flag_the_value_and_what_is_accepted(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit):
        _parse(["certs", "issue", "--out", str(tmp_path), *argv])
    assert message in capsys.readouterr().err


def test_bad_fraction_and_bad_environment_are_explained(monkeypatch, capsys, tmp_path):
    with pytest.raises(SystemExit):
        _parse(["certs", "install", "--dir", str(tmp_path), "--renew-before-fraction", "1"])
    assert "'1' is not a fraction strictly between 0 and 1" in capsys.readouterr().err
    monkeypatch.setenv("GANGKEEPER_CERTS_IP", "10.0.0.1,nope")
    with pytest.raises(SystemExit):
        _parse(["certs", "issue", "--out", str(tmp_path)])
    assert "GANGKEEPER_CERTS_IP='10.0.0.1,nope' is invalid: 'nope' is not an IP address" in capsys.readouterr().err


def test_install_reports_an_api_failure_and_exits_1(monkeypatch, tmp_path, capsys):
    from gangkeeper.certs import cluster

    class Refusing:
        def read_secret(self, namespace, name):
            raise cli.ClusterError(f"cannot read secret {namespace}/{name}: HTTP 403 Forbidden")

    monkeypatch.setattr(cluster, "kubernetes_cluster", lambda kubeconfig: Refusing())
    args = _parse(["certs", "install", "--dir", str(tmp_path)])
    assert args.run(args) == 1
    assert "cannot read secret gangkeeper/gangkeeper-webhook-tls: HTTP 403 Forbidden" in capsys.readouterr().err
