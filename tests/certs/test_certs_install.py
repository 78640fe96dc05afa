"""`certs install` against a fake API that applies JSON Patches and resourceVersion guards like the real one."""

import base64
import datetime

import jsonpatch
import pytest
from cryptography import x509

from gangkeeper import names
from gangkeeper.certs.files import read_certs, write_certs
from gangkeeper.certs.install import MUTATING, VALIDATING, ClusterError, Target, ca_bundle, ca_bundle_patch, install
from gangkeeper.certs.issue import issue

NOW = datetime.datetime(2026, 3, 1, tzinfo=datetime.timezone.utc)
DAY = datetime.timedelta(days=1)
TARGET = Target(namespace=names.DEFAULT_NAMESPACE, secret="gangkeeper-webhook-tls", service="gangkeeper-webhook",
                mutating="gangkeeper", validating="gangkeeper", days=90, renew_before_fraction=0.33)


class FakeCluster:
    """Secrets and webhook configurations as plain dicts; writes obey resourceVersion and JSON Patch `test`."""

    def __init__(self, secret=None):
        self.secrets = {}
        self.version = 0
        if secret is not None:
            self._store(secret)
        self.webhooks = {
            MUTATING: [_webhook("mutate.gangkeeper.io")],
            VALIDATING: [_webhook("validate.gangkeeper.io"), _webhook("validate-extra.gangkeeper.io")],
        }
        self.calls = []

    def _store(self, secret):
        self.version += 1
        secret["metadata"]["resourceVersion"] = str(self.version)
        self.secrets[(secret["metadata"]["namespace"], secret["metadata"]["name"])] = secret

    def read_secret(self, namespace, name):
        return self.secrets.get((namespace, name))

    def write_secret(self, namespace, name, data, resource_version):
        self.calls.append(("write_secret", namespace, name))
        existing = self.secrets.get((namespace, name))
        if (existing or {}).get("metadata", {}).get("resourceVersion") != resource_version:
            raise ClusterError("conflict")
        self._store({"type": "kubernetes.io/tls", "metadata": {"namespace": namespace, "name": name}, "data": data})

    def read_webhooks(self, kind, name):
        assert name == "gangkeeper"
        return self.webhooks[kind]

    def patch_webhooks(self, kind, name, operations):
        self.calls.append(("patch_webhooks", kind, name))
        self.webhooks[kind] = jsonpatch.apply_patch({"webhooks": self.webhooks[kind]}, operations)["webhooks"]


def _webhook(name):
    return {"name": name, "clientConfig": {"service": {"name": "gangkeeper-webhook", "namespace": "gangkeeper"}}}


def _tls_secret(certs):
    data = {"ca.crt": certs.ca_crt, "tls.crt": certs.tls_crt, "tls.key": certs.tls_key}
    return {"type": "kubernetes.io/tls", "metadata": {"namespace": TARGET.namespace, "name": TARGET.secret},
            "data": {k: base64.b64encode(v).decode() for k, v in data.items()}}


def _bundle_cas(webhook):
    return x509.load_pem_x509_certificates(base64.b64decode(webhook["clientConfig"]["caBundle"]))


def _secret_ca(cluster):
    return x509.load_pem_x509_certificate(base64.b64decode(
        cluster.secrets[(TARGET.namespace, TARGET.secret)]["data"]["ca.crt"]))


def test_first_install_issues_creates_the_secret_and_patches_every_webhook(tmp_path):
    cluster = FakeCluster()
    report = install(cluster, TARGET, tmp_path, NOW)
    ca = _secret_ca(cluster)
    for webhook in cluster.webhooks[MUTATING] + cluster.webhooks[VALIDATING]:
        assert _bundle_cas(webhook) == [ca]
    assert read_certs(tmp_path).ca_crt == base64.b64decode(
        cluster.secrets[(TARGET.namespace, TARGET.secret)]["data"]["ca.crt"])
    assert report[0].startswith("certificate: issued, because no certificate")
    assert [c[0] for c in cluster.calls] == ["patch_webhooks", "patch_webhooks", "write_secret"]


def test_second_install_changes_nothing(tmp_path):
    cluster = FakeCluster()
    install(cluster, TARGET, tmp_path, NOW)
    cluster.calls.clear()
    report = install(cluster, TARGET, tmp_path, NOW + DAY)
    assert cluster.calls == []
    assert report[0].startswith("certificate: kept")


def test_renewal_keeps_the_previous_ca_in_the_bundle_until_it_expires(tmp_path):
    cluster = FakeCluster()
    install(cluster, TARGET, tmp_path, NOW)
    old_ca = _secret_ca(cluster)
    install(cluster, TARGET, tmp_path, NOW + 70 * DAY)
    new_ca = _secret_ca(cluster)
    assert new_ca != old_ca
    assert _bundle_cas(cluster.webhooks[MUTATING][0]) == [new_ca, old_ca]
    install(cluster, TARGET, tmp_path, NOW + 91 * DAY)
    assert _bundle_cas(cluster.webhooks[VALIDATING][1]) == [new_ca]


def test_certificates_from_the_directory_are_installed_when_the_secret_has_none(tmp_path):
    own = issue(TARGET.service, TARGET.namespace, NOW, days=90, dns_names=("webhook.example.com",))
    write_certs(tmp_path, own)
    cluster = FakeCluster()
    install(cluster, TARGET, tmp_path, NOW)
    assert base64.b64decode(cluster.secrets[(TARGET.namespace, TARGET.secret)]["data"]["tls.crt"]) == own.tls_crt


def test_an_expiring_secret_is_replaced_under_its_resource_version(tmp_path):
    old = issue(TARGET.service, TARGET.namespace, NOW - 80 * DAY, days=90)
    cluster = FakeCluster(_tls_secret(old))
    install(cluster, TARGET, tmp_path, NOW)
    secret = cluster.secrets[(TARGET.namespace, TARGET.secret)]
    assert secret["metadata"]["resourceVersion"] == "2"
    assert base64.b64decode(secret["data"]["tls.crt"]) != old.tls_crt


def test_a_secret_of_another_type_is_refused_with_what_to_do(tmp_path):
    cluster = FakeCluster({"type": "Opaque", "metadata": {"namespace": TARGET.namespace, "name": TARGET.secret}})
    with pytest.raises(ClusterError, match="has type 'Opaque'.*--secret"):
        install(cluster, TARGET, tmp_path, NOW)
    assert cluster.calls == []


def test_a_reordered_configuration_is_refused_by_the_patch_test():
    certs = issue("svc", "ns", NOW, days=1)
    webhooks = [_webhook("a"), _webhook("b")]
    operations = ca_bundle_patch(webhooks, certs.ca_crt, NOW)
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        jsonpatch.apply_patch({"webhooks": webhooks[::-1]}, operations)


def test_ca_bundle_drops_expired_and_unreadable_cas():
    expired = issue("svc", "ns", NOW - 10 * DAY, days=1).ca_crt
    current = issue("svc", "ns", NOW, days=1).ca_crt
    assert ca_bundle(expired + current, current, NOW) == current
    assert ca_bundle(b"garbage", current, NOW) == current
