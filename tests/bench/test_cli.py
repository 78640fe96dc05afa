"""The benchmark harness keeps every section's figures: running one section replaces only it."""

import argparse

import pytest

from bench import cli
from bench.cli import HEADER, ON_REQUEST, SECTIONS, measured_section, merge


def test_a_fresh_section_replaces_its_old_figures_and_keeps_the_others():
    before = merge("", {"webhook": measured_section("webhook", "old webhook figures", "gangkeeper bench webhook", (0.5, 0.5, 0.5)),
                        "study": measured_section("study", "study figures", "gangkeeper bench study", (0.5, 0.5, 0.5))})
    after = merge(before, {"webhook": measured_section("webhook", "new webhook figures", "gangkeeper bench webhook", (0.5, 0.5, 0.5))})
    assert after.startswith(HEADER)
    assert "new webhook figures" in after and "old webhook figures" not in after
    assert "study figures" in after


def test_sections_appear_in_the_harness_order_whatever_order_they_ran_in():
    text = merge("", {name: measured_section(name, f"{name} figures", "cmd", (0.5, 0.5, 0.5)) for name in ("study", "webhook")})
    assert text.index("webhook figures") < text.index("study figures")
    assert list(SECTIONS)[:2] == ["webhook", "store"]


def test_each_section_says_when_and_how_it_was_measured():
    section = measured_section("fuzz", "figures", "gangkeeper bench fuzz --quick", (1.25, 1.0, 1.0))
    assert "with `gangkeeper bench fuzz --quick`" in section and "load average at start 1.25" in section


def test_a_written_section_whose_name_has_a_hyphen_is_kept_too():
    notes = "<!-- section: occupancy-notes -->\nwhy the target is missed\n<!-- /section: occupancy-notes -->\n"
    after = merge(HEADER + notes, {"webhook": measured_section("webhook", "figures", "gangkeeper bench webhook",
                                                               (0.5, 0.5, 0.5))})
    assert "why the target is missed" in after


@pytest.mark.parametrize("named, expected", [
    ([], [name for name in SECTIONS if name not in ON_REQUEST]),
    (["all"], [name for name in SECTIONS if name not in ON_REQUEST]),
    (["controller-large"], ["controller-large"]),
    (["all", "controller-large"], [name for name in SECTIONS if name not in ON_REQUEST] + ["controller-large"]),
])
def test_all_leaves_out_the_sections_run_only_when_named(monkeypatch, tmp_path, named, expected):
    ran = []
    for name in SECTIONS:
        monkeypatch.setitem(SECTIONS, name, lambda quick, name=name: ran.append(name) or f"{name} figures")
    results = tmp_path / "RESULTS.md"
    assert cli.run(argparse.Namespace(sections=named, quick=True, results=str(results))) == 0
    assert ran == expected and "controller-large" in ON_REQUEST
    assert all(f"{name} figures" in results.read_text() for name in expected)
