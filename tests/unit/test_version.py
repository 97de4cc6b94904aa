"""The version is written once (sse_middleware/_version.py): the build's metadata reads it, the package
reports it, and CHANGELOG.md's newest release is it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import sse_middleware
from sse_middleware._version import __version__

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
RELEASE = re.compile(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$", re.MULTILINE)


def test_the_build_reads_the_one_version_the_package_reports() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "sse_middleware._version.__version__"
    }
    assert sse_middleware.__version__ == __version__


def test_the_changelog_s_newest_release_is_the_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in text and text.index("## [Unreleased]") < text.index("## [0.")
    releases = RELEASE.findall(text)
    assert releases, "no '## [X.Y.Z] - YYYY-MM-DD' heading"
    versions = [tuple(map(int, version.split("."))) for version, _ in releases]
    assert versions == sorted(versions, reverse=True)  # newest first
    assert [date for _, date in releases] == sorted((date for _, date in releases), reverse=True)
    assert releases[0][0] == __version__
