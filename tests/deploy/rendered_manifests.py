"""Render a kustomization with the kubectl the project installs (kustomize 5), or the Helm chart
with Helm's own SDK, and look objects up."""

import os
import subprocess
import sys
from pathlib import Path

import helm_python as helm
import yaml

REPO = Path(__file__).resolve().parents[2]
KUBECTL = Path(sys.executable).parent / "kubectl"
KUSTOMIZATIONS = ("deploy/default", "deploy/overlays/cert-manager")
CHART = REPO / "charts" / "gangkeeper"
OTHER_NAMESPACE = "gpu-scheduling"  # a namespace other than the default to install the chart in


def render(kustomization: str) -> list[dict]:
    result = subprocess.run([str(KUBECTL), "kustomize", str(REPO / kustomization)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"kubectl kustomize {kustomization} failed:\n{result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def render_with(tmp_path: Path, resource: str, *components: str) -> list[dict]:
    """`resource` (a kustomization of the repository) with `components`, through an overlay in
    `tmp_path` that names them as docs/install.md tells one to."""
    (tmp_path / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources:\n  - {os.path.relpath(REPO / resource, tmp_path)}\n"
        "components:\n" + "".join(f"  - {os.path.relpath(REPO / c, tmp_path)}\n" for c in components))
    return render(str(tmp_path))


def render_chart(values: dict | None = None) -> list[dict]:
    """The objects `helm template --include-crds` would print (NOTES.txt is not an object)."""
    with helm.Chart.load(CHART) as chart:
        manifests = chart.render(values, name="gangkeeper", namespace="default")
        crds = chart.crds
    objects = []
    for path, text in sorted(manifests.items()):
        if not path.endswith(".txt"):
            objects += [doc for doc in yaml.safe_load_all(text) if doc]
    for crd in crds:
        objects += [doc for doc in yaml.safe_load_all(crd["data"]) if doc]
    return objects


def find(objects: list[dict], kind: str, name: str) -> dict:
    matches = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind} {name}, found {len(matches)}"
    return matches[0]


def of_kind(objects: list[dict], *kinds: str) -> list[dict]:
    return [o for o in objects if o["kind"] in kinds]
