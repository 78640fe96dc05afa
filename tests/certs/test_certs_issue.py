"""The issued chain: what the apiserver's Go TLS client checks, checked with cryptography's verifier."""

import datetime
import ipaddress

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from gangkeeper import names
from gangkeeper.certs.issue import CLOCK_SKEW, issue, service_dns_names

NOW = datetime.datetime(2026, 1, 15, 12, 0, tzinfo=datetime.timezone.utc)
SERVICE = "gangkeeper-webhook"


@pytest.fixture(scope="module")
def issued():
    return issue(SERVICE, names.DEFAULT_NAMESPACE, NOW, days=30,
                 dns_names=("webhook.example.com",), ips=(ipaddress.ip_address("10.0.0.7"),))


def _certs(issued):
    return x509.load_pem_x509_certificate(issued.ca_crt), x509.load_pem_x509_certificate(issued.tls_crt)


def _verify(issued, name, at=NOW):
    ca, leaf = _certs(issued)
    verifier = PolicyBuilder().store(Store([ca])).time(at).build_server_verifier(name)
    return verifier.verify(leaf, [])


def test_serving_certificate_names_every_service_form_and_the_extras(issued):
    _, leaf = _certs(issued)
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [
        "gangkeeper-webhook", "gangkeeper-webhook.gangkeeper", "gangkeeper-webhook.gangkeeper.svc",
        "gangkeeper-webhook.gangkeeper.svc.cluster.local", "webhook.example.com",
    ]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("10.0.0.7")]


def test_service_dns_names_does_not_repeat_a_name_given_twice():
    again = issue(SERVICE, "ns", NOW, 1, dns_names=service_dns_names(SERVICE, "ns")[:1])
    san = x509.load_pem_x509_certificate(again.tls_crt).extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value
    assert len(san.get_values_for_type(x509.DNSName)) == 4


def test_ca_may_sign_leaves_only(issued):
    ca, _ = _certs(issued)
    constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints)
    usage = ca.extensions.get_extension_for_class(x509.KeyUsage).value
    assert constraints.critical and constraints.value.ca and constraints.value.path_length == 0
    assert usage.key_cert_sign and usage.crl_sign and not usage.digital_signature
    assert ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)


def test_serving_certificate_is_for_servers_only(issued):
    ca, leaf = _certs(issued)
    usage = leaf.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.digital_signature and usage.key_encipherment and not usage.key_cert_sign
    eku = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    aki = leaf.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
    ski = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    assert aki.key_identifier == ski.digest
    assert not leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


def test_keys_are_p256_and_the_key_matches_the_certificate(issued):
    _, leaf = _certs(issued)
    key = load_pem_private_key(issued.tls_key, password=None)
    assert isinstance(key.curve, ec.SECP256R1)
    assert key.public_key() == leaf.public_key()


def test_validity_is_backdated_for_clock_skew(issued):
    ca, leaf = _certs(issued)
    for cert in (ca, leaf):
        assert cert.not_valid_before_utc == NOW - CLOCK_SKEW
        assert cert.not_valid_after_utc == NOW + datetime.timedelta(days=30)


@pytest.mark.parametrize("name", [x509.DNSName("gangkeeper-webhook.gangkeeper.svc"),
                                  x509.DNSName("webhook.example.com"),
                                  x509.IPAddress(ipaddress.ip_address("10.0.0.7"))])
def test_chain_verifies_for_every_name_the_apiserver_may_use(issued, name):
    chain = _verify(issued, name)
    assert chain[-1] == _certs(issued)[0]


@pytest.mark.parametrize("name", [x509.DNSName("gangkeeper-webhook.default.svc"),
                                  x509.DNSName("other.gangkeeper.svc"),
                                  x509.IPAddress(ipaddress.ip_address("10.0.0.8"))])
def test_chain_fails_for_a_name_not_in_the_certificate(issued, name):
    with pytest.raises(VerificationError):
        _verify(issued, name)


def test_chain_fails_outside_the_validity_window(issued):
    name = x509.DNSName("gangkeeper-webhook.gangkeeper.svc")
    with pytest.raises(VerificationError):
        _verify(issued, name, at=NOW + datetime.timedelta(days=31))
    _verify(issued, name, at=NOW - datetime.timedelta(minutes=1))


def test_every_issue_makes_a_new_ca(issued):
    again = issue(SERVICE, names.DEFAULT_NAMESPACE, NOW, days=30)
    assert again.ca_crt != issued.ca_crt
    with pytest.raises(VerificationError):
        ca = x509.load_pem_x509_certificate(again.ca_crt)
        verifier = PolicyBuilder().store(Store([ca])).time(NOW).build_server_verifier(
            x509.DNSName("gangkeeper-webhook.gangkeeper.svc"))
        verifier.verify(_certs(issued)[1], [])
