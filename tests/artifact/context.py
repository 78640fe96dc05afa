"""The Docker build context, as `docker build .` would send it: the repository less what
`.dockerignore` excludes.

Docker's rules, as far as this repository uses them: a pattern is matched against the path
relative to the context root (`*` and `?` within one path segment, `**` across any number of
them); a match on a directory excludes everything below it; a later `!pattern` re-includes;
comments and blank lines are ignored.
"""

import os
import re
import shutil
from pathlib import Path


def _pattern(text: str) -> re.Pattern:
    parts = []
    for segment in text.strip("/").split("/"):
        if segment == "**":
            parts.append("(?:[^/]+/)*")
            continue
        body = "".join("[^/]*" if char == "*" else "[^/]" if char == "?" else re.escape(char) for char in segment)
        parts.append(body + "/")
    return re.compile("".join(parts).removesuffix("/") + "(?:/.*)?")


def rules(dockerignore: Path) -> list[tuple[re.Pattern, bool]]:
    """(pattern, excludes) in file order."""
    found = []
    for line in dockerignore.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        excludes = not line.startswith("!")
        found.append((_pattern(line.lstrip("!")), excludes))
    return found


def is_excluded(relative: str, patterns: list[tuple[re.Pattern, bool]]) -> bool:
    excluded = False
    for pattern, excludes in patterns:
        if pattern.fullmatch(relative):
            excluded = excludes
    return excluded


def copy_context(repository: Path, destination: Path) -> list[str]:
    """Copy the build context into `destination`; the relative paths copied.

    An excluded directory is not entered (`.venv` holds tens of thousands of files) unless a
    `!` rule could re-include something below it."""
    patterns = rules(repository / ".dockerignore")
    prune = all(excludes for _, excludes in patterns)
    copied = []
    for directory, subdirectories, files in os.walk(repository):
        base = Path(directory).relative_to(repository)
        if prune:
            subdirectories[:] = [name for name in subdirectories
                                 if not is_excluded((base / name).as_posix(), patterns)]
        for name in files:
            relative = (base / name).as_posix()
            if is_excluded(relative, patterns):
                continue
            target = destination / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(Path(directory) / name, target)
            copied.append(relative)
    return sorted(copied)
