"""Render a kustomization with the kubectl the project installs (kustomize 5), and look objects up."""

import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
KUBECTL = Path(sys.executable).parent / "kubectl"
KUSTOMIZATIONS = ("deploy/default", "deploy/overlays/cert-manager")


def render(kustomization: str) -> list[dict]:
    result = subprocess.run([str(KUBECTL), "kustomize", str(REPO / kustomization)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"kubectl kustomize {kustomization} failed:\n{result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def find(objects: list[dict], kind: str, name: str) -> dict:
    matches = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind} {name}, found {len(matches)}"
    return matches[0]


def of_kind(objects: list[dict], *kinds: str) -> list[dict]:
    return [o for o in objects if o["kind"] in kinds]
