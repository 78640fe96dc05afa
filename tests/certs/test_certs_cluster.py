"""The adapter's own logic, with the generated API classes replaced: 404 means absent, patches carry
the right content type, writes are guarded by resourceVersion, and failures name the object."""

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gangkeeper.certs.cluster import KubernetesCluster
from gangkeeper.certs.install import MUTATING, VALIDATING, ClusterError


class Recorder:
    """Stands in for CoreV1Api and AdmissionregistrationV1Api: records calls, returns or raises as told."""

    def __init__(self, result=None, error=None):
        self.calls, self.result, self.error = [], result, error

    def __getattr__(self, method):
        def call(*args, **kwargs):
            self.calls.append((method, args, kwargs))
            if self.error:
                raise self.error
            return self.result
        return call


def _cluster(core=None, admission=None):
    cluster = KubernetesCluster(client.ApiClient())
    cluster._core, cluster._admission = core or Recorder(), admission or Recorder()
    return cluster


def test_a_missing_secret_reads_as_none_and_other_errors_name_the_secret():
    assert _cluster(core=Recorder(error=ApiException(status=404, reason="Not Found"))).read_secret("ns", "s") is None
    with pytest.raises(ClusterError, match="cannot read secret ns/s: HTTP 403 Forbidden"):
        _cluster(core=Recorder(error=ApiException(status=403, reason="Forbidden"))).read_secret("ns", "s")


def test_secret_reads_as_a_plain_dict():
    secret = client.V1Secret(type="kubernetes.io/tls", metadata=client.V1ObjectMeta(name="s", resource_version="7"),
                             data={"tls.crt": "eA=="})
    assert _cluster(core=Recorder(result=secret)).read_secret("ns", "s") == {
        "type": "kubernetes.io/tls", "metadata": {"name": "s", "resourceVersion": "7"}, "data": {"tls.crt": "eA=="}}


def test_new_secret_is_created_with_the_tls_type_and_an_existing_one_merge_patched_under_its_version():
    core = Recorder()
    cluster = _cluster(core=core)
    cluster.write_secret("ns", "s", {"tls.crt": "eA=="}, None)
    cluster.write_secret("ns", "s", {"tls.crt": "eQ=="}, "7")
    (create, create_args, _), (patch, patch_args, patch_kwargs) = core.calls
    assert create == "create_namespaced_secret" and create_args[1]["type"] == "kubernetes.io/tls"
    assert patch == "patch_namespaced_secret"
    assert patch_args[2] == {"metadata": {"resourceVersion": "7"}, "data": {"tls.crt": "eQ=="}}
    assert patch_kwargs == {"_content_type": "application/merge-patch+json"}


def test_webhook_patches_are_json_patches_on_the_right_kind():
    admission = Recorder()
    cluster = _cluster(admission=admission)
    operations = [{"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": "eA=="}]
    cluster.patch_webhooks(MUTATING, "gangkeeper", operations)
    cluster.patch_webhooks(VALIDATING, "gangkeeper", operations)
    assert [(m, a, k) for m, a, k in admission.calls] == [
        ("patch_mutating_webhook_configuration", ("gangkeeper", operations), {"_content_type": "application/json-patch+json"}),
        ("patch_validating_webhook_configuration", ("gangkeeper", operations), {"_content_type": "application/json-patch+json"}),
    ]


def test_a_missing_webhook_configuration_is_an_error_that_names_it():
    admission = Recorder(error=ApiException(status=404, reason="Not Found"))
    with pytest.raises(ClusterError, match="cannot read validating webhook configuration gangkeeper: HTTP 404"):
        _cluster(admission=admission).read_webhooks(VALIDATING, "gangkeeper")
