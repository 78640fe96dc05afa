"""Put the webhook's certificates where the cluster uses them: the TLS Secret and every caBundle.

Order matters because the webhook fails closed. The caBundles are patched first and keep the
previous CA for as long as it is valid, so the apiserver trusts both the serving certificate
still mounted in the running pods and the new one; only then is the Secret rewritten, and the
kubelet hands the new files to the pods whenever it next syncs. No request is refused in between.

Everything here but `install` is pure; `install` talks to the cluster only through the small
`Cluster` protocol, which `certs.cluster` implements with the official client and tests fake.
"""

import base64
import datetime
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from gangkeeper.certs.files import CA_CRT, TLS_CRT, TLS_KEY, read_certs, write_certs
from gangkeeper.certs.issue import IssuedCerts, issue, service_dns_names
from gangkeeper.certs.renewal import renewal_decision

SECRET_TYPE = "kubernetes.io/tls"
MUTATING = "mutating"
VALIDATING = "validating"


class ClusterError(Exception):
    """The API refused or failed a request; the message says which object and why."""


class Cluster(Protocol):
    """The four API calls `install` makes; bodies are plain dicts as on the wire."""

    def read_secret(self, namespace: str, name: str) -> dict | None: ...

    def write_secret(self, namespace: str, name: str, data: dict[str, str], resource_version: str | None) -> None: ...

    def read_webhooks(self, kind: str, name: str) -> list[dict]: ...

    def patch_webhooks(self, kind: str, name: str, operations: list[dict]) -> None: ...


@dataclass(frozen=True)
class Target:
    """Where the certificates go and what they must name."""

    namespace: str
    secret: str
    service: str
    mutating: str
    validating: str
    days: int
    renew_before_fraction: float


def install(cluster: Cluster, target: Target, directory: Path, now: datetime.datetime) -> list[str]:
    """Issue when needed, then patch caBundles, write the Secret and `directory`; returns what it did."""
    secret = cluster.read_secret(target.namespace, target.secret)
    if secret is not None and secret.get("type") != SECRET_TYPE:
        raise ClusterError(
            f"secret {target.namespace}/{target.secret} has type {secret.get('type')!r}, not {SECRET_TYPE!r}: "
            f"delete it or pass another --secret"
        )
    installed = certs_from_secret(secret)
    current = installed or read_certs(directory)
    decision = renewal_decision(
        current.tls_crt if current else None, now, target.renew_before_fraction,
        service_dns_names(target.service, target.namespace),
    )
    # No certificate is always renewed (renewal_decision).
    certs = issue(target.service, target.namespace, now, target.days) if decision.renew or current is None else current
    report = [f"certificate: {'issued, because ' if decision.renew else 'kept, '}{decision.reason}"]
    for kind, name in ((MUTATING, target.mutating), (VALIDATING, target.validating)):
        operations = ca_bundle_patch(cluster.read_webhooks(kind, name), certs.ca_crt, now)
        if operations:
            cluster.patch_webhooks(kind, name, operations)
        report.append(f"{kind} webhook configuration {name}: {'caBundle patched' if operations else 'caBundle up to date'}")
    if certs != installed:
        cluster.write_secret(target.namespace, target.secret, secret_data(certs),
                             secret["metadata"].get("resourceVersion") if secret else None)
        report.append(f"secret {target.namespace}/{target.secret}: {'updated' if secret else 'created'}")
    write_certs(directory, certs)
    report.append(f"files: {directory}/{{{CA_CRT},{TLS_CRT},{TLS_KEY}}}")
    return report


def certs_from_secret(secret: dict | None) -> IssuedCerts | None:
    """The certificates a Secret holds, or None unless it holds all three."""
    data = (secret or {}).get("data") or {}
    if not all(data.get(key) for key in (CA_CRT, TLS_CRT, TLS_KEY)):
        return None
    ca_crt, tls_crt, tls_key = (base64.b64decode(data[key]) for key in (CA_CRT, TLS_CRT, TLS_KEY))
    return IssuedCerts(ca_crt=ca_crt, tls_crt=tls_crt, tls_key=tls_key)


def secret_data(certs: IssuedCerts) -> dict[str, str]:
    """The `data` of a kubernetes.io/tls Secret (values base64, as the API stores them)."""
    return {key: base64.b64encode(value).decode() for key, value in
            ((CA_CRT, certs.ca_crt), (TLS_CRT, certs.tls_crt), (TLS_KEY, certs.tls_key))}


def ca_bundle(current_bundle: bytes, ca_crt: bytes, now: datetime.datetime) -> bytes:
    """The CA first, then every other CA of the current bundle that has not expired.

    Keeping the previous CA lets pods that still serve the previous certificate be trusted
    until the kubelet refreshes their files; pruning expired ones keeps the bundle bounded.
    """
    ca = x509.load_pem_x509_certificate(ca_crt)
    kept = [c for c in _load_bundle(current_bundle) if c != ca and c.not_valid_after_utc > now]
    return ca_crt + b"".join(c.public_bytes(Encoding.PEM) for c in kept)


def ca_bundle_patch(webhooks: list[dict], ca_crt: bytes, now: datetime.datetime) -> list[dict]:
    """A JSON Patch setting caBundle on every webhook that lacks it; empty when all are current.

    Each change is guarded by a `test` of the webhook's name at that index, so that a
    configuration reordered since it was read is refused instead of patched at the wrong entry.
    """
    operations = []
    for index, webhook in enumerate(webhooks):
        current = base64.b64decode(webhook.get("clientConfig", {}).get("caBundle") or "")
        wanted = ca_bundle(current, ca_crt, now)
        if wanted != current:
            operations += [
                {"op": "test", "path": f"/webhooks/{index}/name", "value": webhook["name"]},
                {"op": "add", "path": f"/webhooks/{index}/clientConfig/caBundle",
                 "value": base64.b64encode(wanted).decode()},
            ]
    return operations


def _load_bundle(bundle: bytes) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(bundle) if bundle.strip() else []
    except ValueError:
        return []
