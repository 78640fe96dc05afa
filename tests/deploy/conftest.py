"""Each kustomization is rendered once per session."""

import pytest

from tests.deploy.rendered_manifests import KUSTOMIZATIONS, render


@pytest.fixture(scope="session", params=KUSTOMIZATIONS)
def rendered(request) -> list[dict]:
    """The objects of one rendered kustomization; a test using it runs once per kustomization."""
    return render(request.param)


@pytest.fixture(scope="session")
def default() -> list[dict]:
    return render("deploy/default")


@pytest.fixture(scope="session")
def cert_manager() -> list[dict]:
    return render("deploy/overlays/cert-manager")
