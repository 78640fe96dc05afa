"""Whether the installed serving certificate must be replaced: a pure function of the clock and the PEM.

Renewing once a third of the lifetime is left (cert-manager's default) leaves time for the
kubelet to refresh the mounted Secret (up to a minute or more) and for a failed renewal job to be
noticed and retried long before the apiserver starts refusing the webhook.
"""

import datetime
from dataclasses import dataclass

from cryptography import x509

DEFAULT_RENEW_BEFORE_FRACTION = 0.33


@dataclass(frozen=True)
class Decision:
    renew: bool
    reason: str


def renewal_decision(
    tls_crt: bytes | None,
    now: datetime.datetime,
    renew_before_fraction: float = DEFAULT_RENEW_BEFORE_FRACTION,
    required_dns_names: tuple[str, ...] = (),
) -> Decision:
    """Renew when there is no usable certificate, it does not name the Service, or its end is near."""
    if not tls_crt:
        return Decision(True, "no certificate is installed")
    try:
        cert = x509.load_pem_x509_certificate(tls_crt)
    except ValueError as err:
        return Decision(True, f"the installed certificate cannot be read: {err}")
    missing = sorted(set(required_dns_names) - set(_dns_names(cert)))
    if missing:
        return Decision(True, f"the certificate does not name {', '.join(missing)}")
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    if now < start:
        return Decision(True, f"the certificate is not valid before {start.isoformat()}")
    if now >= end:
        return Decision(True, f"the certificate expired at {end.isoformat()}")
    renew_at = end - (end - start) * renew_before_fraction
    if now >= renew_at:
        return Decision(True, f"less than {renew_before_fraction:.0%} of the lifetime is left (expires {end.isoformat()})")
    return Decision(False, f"valid until {end.isoformat()}, renewal due from {renew_at.isoformat()}")


def _dns_names(cert: x509.Certificate) -> list[str]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return san.get_values_for_type(x509.DNSName)
