"""The user's cluster, as kubectl finds it: `--kubeconfig`, else $KUBECONFIG, else
~/.kube/config, else the pod's service account; the context `--context` names, else the current
one; the namespace `-n` names, else the context's, else `default`.

The API is called through the controller's adapter (`controller.reading.kube`); this module alone
reads the kubeconfig's contexts with the client, for the namespace a context names.
"""

import os
from dataclasses import dataclass
from pathlib import Path

from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException

from gangkeeper.cli import CommandError, credentials_problem
from gangkeeper.controller.reading import kube as api

HOME_KUBECONFIG = "~/.kube/config"
IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
DEFAULT_NAMESPACE = "default"
# A command waits this long for one answer, and retries a temporary failure once.
TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class Connection:
    kube: api.Kube
    namespace: str  # the context's (or the pod's) namespace, where `-n` names none
    server: str


def kubeconfig_path(flag: str | None) -> str | None:
    """The kubeconfig kubectl would read (several files in $KUBECONFIG are merged by the client),
    or None when there is none and the pod's service account is the one left."""
    if flag:
        return flag
    if os.environ.get("KUBECONFIG"):
        return os.environ["KUBECONFIG"]
    home = os.path.expanduser(HOME_KUBECONFIG)
    return home if os.path.exists(home) or not _in_cluster() else None


def connect(kubeconfig: str | None, context: str | None) -> Connection:
    """The API client and namespace for the user's kubeconfig and context, or a one-line
    CommandError saying which credentials are missing."""
    path = kubeconfig_path(kubeconfig)
    try:
        namespace = _context_namespace(path, context) if path is not None else _pod_namespace()
        kube = api.load(path, context=context, retries=1, timeout=TIMEOUT_SECONDS)
    except (ConfigException, OSError) as error:
        raise credentials_problem(kubeconfig, "--kubeconfig", "KUBECONFIG", error, path is None) from None
    return Connection(kube, namespace, str(kube.api_client.configuration.host))


def _context_namespace(path: str, context: str | None) -> str:
    contexts, current = k8s_config.list_kube_config_contexts(config_file=path)
    chosen = current if context is None else next((c for c in contexts if c.get("name") == context), None)
    if chosen is None:
        known = ", ".join(sorted(str(c.get("name")) for c in contexts)) or "none"
        raise CommandError(f"context {context} is not in the kubeconfig {path}; pass one of its contexts with "
                           f"--context: {known}")
    return str((chosen.get("context") or {}).get("namespace") or DEFAULT_NAMESPACE)


def _pod_namespace() -> str:
    try:
        return IN_CLUSTER_NAMESPACE.read_text().strip() or DEFAULT_NAMESPACE
    except OSError:
        return DEFAULT_NAMESPACE


def _in_cluster() -> bool:
    return k8s_config.incluster_config.SERVICE_HOST_ENV_NAME in os.environ
