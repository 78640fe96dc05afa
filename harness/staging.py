"""The checkout laid out as the installed distributions lay it out, for the lint tools that find a
package by its import name (import-linter, mypy).

On a checkout `gangkeeper.webhook`, `gangkeeper.controller` and `gangkeeper.certs` live in
top-level folders that only an installed distribution maps under `gangkeeper` (setup.cfg's
`package_dir`), and neither tool can follow that map through an editable install. So the folders
are copied into a temporary directory where their import names put them, and what a tool reports
about a copied file is mapped back to the repository's file, which is the one a developer opens.
Copies, not symlinks: import-linter does not walk into a linked folder.
"""

import configparser
import shutil
from pathlib import Path


def package_dirs(setup_cfg: Path) -> dict[str, Path]:
    """Import name → folder, from a setup.cfg's `[options] package_dir` (paths relative to it)."""
    parser = configparser.ConfigParser()
    parser.read(setup_cfg)
    folders = {}
    for line in parser["options"]["package_dir"].strip().splitlines():
        name, _, folder = (part.strip() for part in line.partition("="))
        folders[name] = (setup_cfg.parent / folder).resolve()
    return folders


def staged_folder(name: str, tree: Path) -> Path:
    """Where the package `name` lies in the staged tree."""
    return tree.joinpath(*name.split("."))


def lay_out(folders: dict[str, Path], into: Path) -> None:
    """Each folder copied to where its import name puts it (parents first: `gangkeeper` before
    `gangkeeper.webhook`), without caches."""
    for name in sorted(folders, key=lambda name: name.count(".")):
        shutil.copytree(folders[name], staged_folder(name, into), dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def repository_file(staged: Path, folders: dict[str, Path], tree: Path) -> Path | None:
    """The repository's file that `staged` is a copy of, or None for a file outside the staged
    tree. The deepest package wins: `gangkeeper/webhook/app.py` comes from webhook/, not from
    gangkeeper/webhook/."""
    for name in sorted(folders, key=lambda name: name.count("."), reverse=True):
        if staged.is_relative_to(staged_folder(name, tree)):
            return folders[name] / staged.relative_to(staged_folder(name, tree))
    return None
