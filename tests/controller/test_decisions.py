"""The typed decisions (controller/deciding/decisions.py) speak the words the CRD and the audit log define."""

import yaml

from gangkeeper.controller.deciding.decisions import GangEvent, Phase
from sim.deployed import DEPLOY_BASE


def test_the_phases_are_exactly_those_the_gang_crd_accepts():
    crd = yaml.safe_load((DEPLOY_BASE / "crd-gangs.yaml").read_text())
    (version,) = crd["spec"]["versions"]
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert [phase.value for phase in Phase] == status["properties"]["phase"]["enum"]


def test_each_event_is_filed_under_gang_with_its_decision():
    assert {event.value: event.decision for event in GangEvent} == {
        "gang.waiting": "waiting", "gang.reserved": "reserved", "gang.released": "released",
        "gang.bound": "bound", "gang.rolled_back": "rolled_back", "gang.timed_out": "timed_out",
        "gang.suspended": "suspended", "gang.resumed": "resumed", "gang.member_deleted": "member_deleted",
        "gang.preempting": "preempting", "gang.preempted": "preempted", "gang.stuck": "stuck",
        "gang.provisioning": "provisioning", "gang.provisioning_failed": "provisioning_failed",
        "gang.degraded": "degraded", "gang.recovered": "recovered"}
