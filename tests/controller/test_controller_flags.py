"""`gangkeeper controller`'s rollback, preemption, topology and incomplete-group flags: from the
command line or the environment, into the settings."""

import pytest

from gangkeeper.cli import build_parser
from gangkeeper.controller.cli import settings_from
from gangkeeper.controller.deciding.settings import Ownerless, Preempting


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


def test_a_group_short_of_members_is_reported_after_5_minutes_without_a_new_one_unless_told_otherwise(monkeypatch):
    assert settings().incomplete_group_seconds == 300
    assert settings("--incomplete-group-seconds", "900").incomplete_group_seconds == 900
    monkeypatch.setenv("GANGKEEPER_INCOMPLETE_GROUP_SECONDS", "60")
    assert settings().incomplete_group_seconds == 60


@pytest.mark.parametrize("value", ["0", "-5", "5m", "1.5", "10000001"])
def test_a_set_time_that_is_no_whole_number_of_seconds_is_refused_naming_the_flag_and_what_it_takes(value, capsys):
    with pytest.raises(SystemExit):
        settings("--incomplete-group-seconds", value)
    assert (f"argument --incomplete-group-seconds: {value!r} is not a number of seconds (a whole number from 1 to "
            f"10000000)") in capsys.readouterr().err


def test_a_bad_set_time_in_the_environment_is_refused_naming_the_variable(capsys, monkeypatch):
    monkeypatch.setenv("GANGKEEPER_INCOMPLETE_GROUP_SECONDS", "soon")
    with pytest.raises(SystemExit):
        settings()
    assert ("environment variable GANGKEEPER_INCOMPLETE_GROUP_SECONDS='soon' is invalid: 'soon' is not a number of "
            "seconds") in capsys.readouterr().err
