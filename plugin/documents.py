"""Manifests in, `-o yaml` out: the one module of the product that reads and writes YAML (PyYAML,
which the kubernetes client requires too). JSON is YAML, so `-f` takes either."""

from collections.abc import Mapping

import yaml

from gangkeeper.cli import CommandError


def read_documents(text: str, source: str) -> list[object]:
    """The objects of a manifest, as `kubectl apply -f` reads it: every document, the items of a
    `List`; a one-line CommandError naming the file and where it stops being YAML."""
    try:
        documents = [document for document in yaml.safe_load_all(text) if document is not None]
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise CommandError(f"{source} is not YAML: {where}{problem}; pass a manifest as kubectl apply -f takes "
                           f"it") from None
    found: list[object] = []
    for document in documents:
        if isinstance(document, Mapping) and document.get("kind") == "List":
            found += document.get("items") or []
        else:
            found.append(document)
    if not found:
        raise CommandError(f"{source} holds no object; pass a manifest of the workload to plan (a Job, JobSet, "
                           f"PyTorchJob, ...)")
    return found


def to_yaml(answer: Mapping) -> str:
    return yaml.safe_dump(dict(answer), sort_keys=False, allow_unicode=True, width=120)
