"""The only module of `certs` that imports the `kubernetes` client: the `Cluster` protocol, for real.

Each method is one API call and returns plain dicts, so `certs.install` stays testable with a
fake and knows nothing of client models or urllib3.
"""

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from gangkeeper.certs.install import MUTATING, SECRET_TYPE, ClusterError


def kubernetes_cluster(kubeconfig: str | None) -> "KubernetesCluster":
    """Credentials from `kubeconfig` when given, else the pod's service account, else ~/.kube/config."""
    if kubeconfig:
        config.load_kube_config(config_file=kubeconfig)
    else:
        try:
            config.load_incluster_config()
        except config.ConfigException:
            config.load_kube_config()
    return KubernetesCluster(client.ApiClient())


class KubernetesCluster:
    def __init__(self, api_client: client.ApiClient):
        self._api = api_client
        self._core = client.CoreV1Api(api_client)
        self._admission = client.AdmissionregistrationV1Api(api_client)

    def read_secret(self, namespace: str, name: str) -> dict | None:
        try:
            secret = self._core.read_namespaced_secret(name, namespace)
        except ApiException as err:
            if err.status == 404:
                return None
            raise _error(err, f"read secret {namespace}/{name}") from err
        return self._api.sanitize_for_serialization(secret)

    def write_secret(self, namespace: str, name: str, data: dict[str, str], resource_version: str | None) -> None:
        """Create, or merge-patch guarded by resourceVersion so a concurrent writer is not overwritten."""
        try:
            if resource_version is None:
                body = {"apiVersion": "v1", "kind": "Secret", "type": SECRET_TYPE,
                        "metadata": {"name": name, "namespace": namespace}, "data": data}
                # The method's validate_call makes the V1Secret its annotation asks for out of the dict.
                self._core.create_namespaced_secret(namespace, body)  # type: ignore[arg-type]
            else:
                body = {"metadata": {"resourceVersion": resource_version}, "data": data}
                self._core.patch_namespaced_secret(name, namespace, body,
                                                   _content_type="application/merge-patch+json")
        except ApiException as err:
            raise _error(err, f"write secret {namespace}/{name}") from err

    def read_webhooks(self, kind: str, name: str) -> list[dict]:
        read = (self._admission.read_mutating_webhook_configuration if kind == MUTATING
                else self._admission.read_validating_webhook_configuration)
        try:
            configuration = self._api.sanitize_for_serialization(read(name))
        except ApiException as err:
            raise _error(err, f"read {kind} webhook configuration {name}") from err
        return configuration.get("webhooks") or []

    def patch_webhooks(self, kind: str, name: str, operations: list[dict]) -> None:
        patch = (self._admission.patch_mutating_webhook_configuration if kind == MUTATING
                 else self._admission.patch_validating_webhook_configuration)
        try:
            patch(name, operations, _content_type="application/json-patch+json")
        except ApiException as err:
            raise _error(err, f"patch {kind} webhook configuration {name}") from err


def _error(err: ApiException, action: str) -> ClusterError:
    return ClusterError(f"cannot {action}: HTTP {err.status} {err.reason}")
