"""Make a throw-away CA and the webhook's serving certificate, as PEM bytes.

Keys are ECDSA P-256: a key is generated in about a millisecond (RSA-2048 takes tens to hundreds
of milliseconds, which adds up in tests that issue a chain per case), signatures and handshakes
are cheaper, PEM files are small enough to sit comfortably in a `caBundle`, and P-256 is accepted
by everything on the path: Go's crypto/tls in the kube-apiserver, OpenSSL behind Python's `ssl`
(gunicorn), and cert-manager.

The CA's private key is never returned: it signs one serving certificate and is dropped. Renewal
issues a fresh CA, so no long-lived signing key exists anywhere, and there is nothing to leak.
"""

import datetime
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Nodes and the control plane rarely agree to the second; a certificate that starts "now" is
# refused for a few seconds by a peer whose clock is behind.
CLOCK_SKEW = datetime.timedelta(minutes=5)
DAYS_RANGE = (1, 3650)

CA_COMMON_NAME = "gangkeeper-webhook-ca"


@dataclass(frozen=True)
class IssuedCerts:
    """The three files a TLS Secret of type kubernetes.io/tls carries, PEM-encoded."""

    ca_crt: bytes
    tls_crt: bytes
    tls_key: bytes


def service_dns_names(service: str, namespace: str) -> tuple[str, ...]:
    """Every name a client may use to reach a Service; the apiserver uses `svc.ns.svc`."""
    return (
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    )


def issue(
    service: str,
    namespace: str,
    now: datetime.datetime,
    days: int,
    dns_names: tuple[str, ...] = (),
    ips: tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, ...] = (),
) -> IssuedCerts:
    """A new CA and a serving certificate for the Service, both valid from `now` (backdated) for `days`."""
    not_before = now - CLOCK_SKEW
    not_after = now + datetime.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = _ca_certificate(ca_key, not_before, not_after)
    names = tuple(dict.fromkeys(service_dns_names(service, namespace) + tuple(dns_names)))
    tls_key = ec.generate_private_key(ec.SECP256R1())
    tls_cert = _serving_certificate(tls_key, ca_key, ca_cert, names, tuple(ips), not_before, not_after)
    return IssuedCerts(
        ca_crt=ca_cert.public_bytes(serialization.Encoding.PEM),
        tls_crt=tls_cert.public_bytes(serialization.Encoding.PEM),
        tls_key=tls_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


def _ca_certificate(key: ec.EllipticCurvePrivateKey, not_before: datetime.datetime,
                    not_after: datetime.datetime) -> x509.Certificate:
    """path_length=0: this CA may sign the serving certificate, never another CA."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_COMMON_NAME)])
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(key_cert_sign=True, crl_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )


def _serving_certificate(key: ec.EllipticCurvePrivateKey, ca_key: ec.EllipticCurvePrivateKey,
                         ca_cert: x509.Certificate, dns_names: tuple[str, ...],
                         ips: tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, ...],
                         not_before: datetime.datetime, not_after: datetime.datetime) -> x509.Certificate:
    """Go's crypto/tls ignores the Common Name: only the SANs decide whether the name matches.

    keyEncipherment means nothing for an EC key; it is set because the specification of our
    certificates asks for it and verifiers accept it, so a key-type change needs no new profile.
    """
    sans = [x509.DNSName(n) for n in dns_names] + [x509.IPAddress(ip) for ip in ips]
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[2])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(digital_signature=True, key_encipherment=True), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )


def _key_usage(**enabled: bool) -> x509.KeyUsage:
    usages = dict.fromkeys(
        ("digital_signature", "content_commitment", "key_encipherment", "data_encipherment",
         "key_agreement", "key_cert_sign", "crl_sign", "encipher_only", "decipher_only"),
        False,
    )
    return x509.KeyUsage(**(usages | enabled))
