"""`gangkeeper controller`'s rollback and preemption flags: from the command line or the environment, into the settings."""

import pytest

from gangkeeper.cli import build_parser
from gangkeeper.controller.cli import settings_from
from gangkeeper.controller.reconciler import Ownerless, Preempting


def settings(*flags: str):
    argv = ["controller", *flags]
    return settings_from(build_parser(argv).parse_args(argv))


def test_members_without_owner_are_deleted_unless_told_to_keep_them():
    assert settings().rollback_ownerless is Ownerless.DELETE
    assert settings("--rollback-ownerless", "keep").rollback_ownerless is Ownerless.KEEP


def test_the_environment_sets_it_too(monkeypatch):
    monkeypatch.setenv("GANGKEEPER_ROLLBACK_OWNERLESS", "keep")
    assert settings().rollback_ownerless is Ownerless.KEEP


def test_anything_else_is_refused_naming_what_is_accepted(capsys, monkeypatch):
    with pytest.raises(SystemExit):
        settings("--rollback-ownerless", "orphan")
    assert "'orphan' is not accepted: write one of delete, keep" in capsys.readouterr().err
    monkeypatch.setenv("GANGKEEPER_ROLLBACK_OWNERLESS", "orphan")
    with pytest.raises(SystemExit):
        settings()
    assert "GANGKEEPER_ROLLBACK_OWNERLESS='orphan' is invalid: 'orphan' is not accepted" in capsys.readouterr().err


def test_help_says_what_each_choice_costs(capsys):
    with pytest.raises(SystemExit):
        settings("--help")
    text = " ".join(capsys.readouterr().out.split())
    assert "--rollback-ownerless {delete,keep}" in text
    assert "holding what they hold until someone deletes them (env GANGKEEPER_ROLLBACK_OWNERLESS; default: delete)" \
        in text


def test_preemption_is_on_unless_told_never_and_refuses_anything_else(capsys, monkeypatch):
    assert settings().preemption is Preempting.LOWER_PRIORITY
    assert settings("--preemption", "Never").preemption is Preempting.NEVER
    monkeypatch.setenv("GANGKEEPER_PREEMPTION", "Never")
    assert settings().preemption is Preempting.NEVER
    with pytest.raises(SystemExit):
        settings("--preemption", "Always")
    assert "'Always' is not accepted: write one of LowerPriority, Never" in capsys.readouterr().err


def test_the_cluster_wide_domains_are_the_zone_label_then_an_optional_finer_one(capsys, monkeypatch):
    default = settings().policy.topology
    assert (default.zone_label, default.rack_label) == ("topology.kubernetes.io/zone", None)
    blocks = settings("--rack-label", "cloud.google.com/gce-topology-block").policy.topology
    assert blocks.labels == ("cloud.google.com/gce-topology-block", "topology.kubernetes.io/zone"), "finest first"
    monkeypatch.setenv("GANGKEEPER_ZONE_LABEL", "example.com/room")
    assert settings().policy.topology.zone_label == "example.com/room"
    with pytest.raises(SystemExit):
        settings("--rack-label", "Not A Key")
    assert "'Not A Key' is not accepted: write a label key such as topology.kubernetes.io/zone" in capsys.readouterr().err
