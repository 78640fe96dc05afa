"""Where the traffic recorded from a real kube-apiserver lives: `shared/` beside the repository
(as laid out for development and CI), or the directory named by GANGKEEPER_FIXTURES."""

import os
from pathlib import Path

RECORDED = Path(os.environ.get("GANGKEEPER_FIXTURES")
                or Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "kube-apiserver-v1.36")
ADMISSION = RECORDED / "admission"
API = RECORDED / "api"

if not ADMISSION.is_dir() or not API.is_dir():
    raise RuntimeError(f"recorded kube-apiserver fixtures not found at {RECORDED}; "
                       f"check out shared/ beside the repository or set GANGKEEPER_FIXTURES")
