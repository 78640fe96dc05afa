"""The repository's copies of the recordings, and of the ecosystem's CRDs and examples, match
`shared/fixtures/`, where that exists.

`shared/` is laid beside the repository for development and CI; a fresh clone on its own has
none, and then there is nothing to compare (the copies are what the tests read either way)."""

import filecmp
from pathlib import Path

import pytest

from tests.recorded import FIXTURES

SHARED = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
RECORDINGS = ("kube-apiserver-v1.36", "kube-scheduler-v1.36", "kube-controller-manager-v1.36", "ecosystem")


def _files(root: Path) -> set[Path]:
    return {path.relative_to(root) for path in root.rglob("*") if path.is_file()}


@pytest.mark.parametrize("recording", RECORDINGS)
def test_the_repository_carries_the_recording(recording):
    assert _files(FIXTURES / recording), f"tests/fixtures/{recording} is empty"


@pytest.mark.parametrize("recording", RECORDINGS)
def test_the_copy_is_the_shared_recording(recording):
    shared = SHARED / recording
    if not shared.is_dir():
        pytest.skip(f"no {shared} beside this clone: nothing to compare the copy with")
    ours = FIXTURES / recording
    missing, extra = _files(shared) - _files(ours), _files(ours) - _files(shared)
    changed = [str(path) for path in sorted(_files(shared) & _files(ours))
               if not filecmp.cmp(shared / path, ours / path, shallow=False)]
    assert not (missing or extra or changed), (
        f"tests/fixtures/{recording} differs from {shared}: missing {sorted(map(str, missing))}, "
        f"extra {sorted(map(str, extra))}, changed {changed}; copy the new recording in with "
        f"`cp -r {shared} tests/fixtures/`")
