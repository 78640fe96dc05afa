"""A kubeconfig file pointing kubectl (or any client) at the emulated API server."""

import base64
import json
from pathlib import Path


def write_kubeconfig(path: str | Path, server_url: str, token: str, ca_file: str | None = None) -> Path:
    """Write a one-context kubeconfig; JSON is valid YAML, so kubectl reads it as is."""
    cluster: dict = {"server": server_url}
    if ca_file:
        cluster["certificate-authority-data"] = base64.b64encode(Path(ca_file).read_bytes()).decode()
    elif server_url.startswith("https://"):
        cluster["insecure-skip-tls-verify"] = True
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "sim", "preferences": {},
        "clusters": [{"name": "sim", "cluster": cluster}],
        "users": [{"name": "sim", "user": {"token": token}}],
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "sim"}}],
    }
    path = Path(path)
    path.write_text(json.dumps(config, indent=2))
    return path
