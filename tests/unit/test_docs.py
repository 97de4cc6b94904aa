"""The README is the landing page: it keeps the quickstart's commands exactly as they are, and every page of
the manual (mkdocs.yml's nav) is one click from it. Links between the pages, anchors and pages left out of
the nav are mkdocs's to check (``mkdocs build --strict`` in .ci/run)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
QUICKSTART = (
    'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[demo]" && python examples/lab.py',
    'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[test]"'
    " && python -m pytest -n 2 --dist loadfile",
    'python -m pytest tests/unit -m "not slow" -n 2',
)


def _shell_lines(markdown: str) -> set[str]:
    """The lines of the ```bash blocks of ``markdown``."""
    blocks = re.findall(r"^```bash\n(.*?)^```", markdown, re.DOTALL | re.MULTILINE)
    return {line.strip() for block in blocks for line in block.splitlines()}


def _relative_links(markdown: str) -> set[str]:
    """The targets of ``markdown``'s links that are paths in the repository (no scheme, no anchor)."""
    targets = re.findall(r"\]\(([^)\s]+)\)", markdown)
    paths = [target for target in targets if "://" not in target and not target.startswith("#")]
    return {path.split("#", 1)[0] for path in paths}


def _nav_pages() -> set[str]:
    """The pages of mkdocs.yml's nav, as paths from the repository's root."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = config.split("\nnav:\n", 1)[1].split("\n\n", 1)[0]
    return {f"docs/{page}" for page in re.findall(r":\s*(\S+\.md)\s*$", nav, re.MULTILINE)}


def test_the_readme_keeps_the_quickstart_commands() -> None:
    lines = _shell_lines(README.read_text(encoding="utf-8"))
    assert set(QUICKSTART) <= lines, set(QUICKSTART) - lines
    # CI runs the README's test command, exactly: the last step of the tests' quickstart line.
    steps = (ROOT / ".ci" / "run").read_text().splitlines()
    ci = [line for line in steps if line and not line.startswith("#")]
    assert ci[-1] == QUICKSTART[1].rsplit(" && ", 1)[1]


def test_every_page_of_the_manual_is_one_click_from_the_readme() -> None:
    links = _relative_links(README.read_text(encoding="utf-8"))
    assert not {link for link in links if not (ROOT / link).exists()}, "a README link to nothing"
    pages = _nav_pages()
    assert len(pages) >= 10, pages  # the nav was read
    assert pages <= links, f"pages the README does not link to: {sorted(pages - links)}"


def test_the_checks_see_a_missing_command_and_a_missing_link() -> None:
    """The control: the helpers above find what they look for, and miss what is gone."""
    page = "```bash\n" + QUICKSTART[0] + "\n```\nsee [Settings](docs/settings.md#per-route-or-per-request)\n"
    assert QUICKSTART[0] in _shell_lines(page) and QUICKSTART[1] not in _shell_lines(page)
    assert _relative_links(page + "[PyPI](https://pypi.org/) [up](#top)") == {"docs/settings.md"}
    assert "docs/settings.md" in _nav_pages()


def test_every_example_the_manual_names_is_started_by_the_tests() -> None:
    """docs/index.md says of its examples: "each runnable and started by the tests"."""
    named = set(re.findall(r"examples/(\w+\.py)", (ROOT / "docs" / "index.md").read_text(encoding="utf-8")))
    tests = (ROOT / "tests" / "e2e" / "test_examples.py").read_text(encoding="utf-8")
    started = set(re.findall(r'example\("(\w+\.py)"\)', tests))
    assert len(named) >= 5, named  # the page was read
    assert not {name for name in named if not (ROOT / "examples" / name).exists()}
    assert named <= started, f"named on the page, started by no test: {sorted(named - started)}"
