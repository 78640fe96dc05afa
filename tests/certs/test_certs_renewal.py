"""The renewal decision table: renew when missing, unreadable, misnamed, not yet or no longer valid, or due."""

import datetime

import pytest

from gangkeeper.certs.issue import CLOCK_SKEW, issue, service_dns_names
from gangkeeper.certs.renewal import renewal_decision

ISSUED_AT = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
DAY = datetime.timedelta(days=1)
# 90 days from ISSUED_AT, backdated by CLOCK_SKEW: a third of the lifetime is left 30 days + a bit before the end.
CERT = issue("gangkeeper-webhook", "gangkeeper", ISSUED_AT, days=90).tls_crt
NAMES = service_dns_names("gangkeeper-webhook", "gangkeeper")
LIFETIME = 90 * DAY + CLOCK_SKEW
RENEW_AT = ISSUED_AT + 90 * DAY - LIFETIME / 3


@pytest.mark.parametrize(("cert", "now", "names", "renew", "reason"), [
    (None, ISSUED_AT, NAMES, True, "no certificate"),
    (b"", ISSUED_AT, NAMES, True, "no certificate"),
    (b"-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n", ISSUED_AT, NAMES, True, "cannot be read"),
    (CERT, ISSUED_AT - 2 * CLOCK_SKEW, NAMES, True, "not valid before"),
    (CERT, ISSUED_AT - CLOCK_SKEW, NAMES, False, "valid until"),
    (CERT, ISSUED_AT, NAMES, False, "valid until"),
    (CERT, RENEW_AT - datetime.timedelta(seconds=1), NAMES, False, "valid until"),
    (CERT, RENEW_AT, NAMES, True, "of the lifetime is left"),
    (CERT, ISSUED_AT + 89 * DAY, NAMES, True, "of the lifetime is left"),
    (CERT, ISSUED_AT + 90 * DAY, NAMES, True, "expired"),
    (CERT, ISSUED_AT + 400 * DAY, NAMES, True, "expired"),
    (CERT, ISSUED_AT, service_dns_names("renamed", "gangkeeper"), True, "does not name renamed"),
    (CERT, ISSUED_AT, (), False, "valid until"),
])
def test_renewal_decision(cert, now, names, renew, reason):
    decision = renewal_decision(cert, now, 1 / 3, names)
    assert decision.renew is renew
    assert reason in decision.reason


def test_a_larger_fraction_renews_earlier():
    now = ISSUED_AT + 50 * DAY
    assert not renewal_decision(CERT, now, 0.33).renew
    assert renewal_decision(CERT, now, 0.5).renew
