"""The README is the front door and docs/ holds the rest: every link between them resolves, to a
file of the repository and, with a #fragment, to a heading of it (as GitHub makes its anchors)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
README_LINES = 400


def outside_code(text: str) -> str:
    """The text without fenced code blocks and inline code, where brackets are not links."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    found: set[str] = set()
    for line in outside_code(page.read_text()).splitlines():
        heading = re.match(r"^#{1,6} (.*)$", line)
        if heading:
            found.add(re.sub(r"[^\w\- ]", "", heading.group(1).replace("`", "").lower()).replace(" ", "-"))
    return found


def links(page: Path) -> list[str]:
    text = page.read_text()
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return [target for target in LINK.findall(text) if not re.match(r"^[a-z]+://|^mailto:", target)]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_link_resolves(page):
    broken = []
    for target in links(page):
        path, _, fragment = target.partition("#")
        destination = (page.parent / path).resolve() if path else page
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif fragment and destination.suffix == ".md" and fragment not in anchors(destination):
            broken.append(f"{target}: no heading #{fragment} in {destination.relative_to(ROOT)}")
    assert broken == []


def test_the_readme_is_a_front_door():
    assert len((ROOT / "README.md").read_text().splitlines()) < README_LINES
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in links(ROOT / "README.md")}
    assert {page for page in PAGES if page.name != "README.md"} <= linked, "every page of docs/ is linked from it"
