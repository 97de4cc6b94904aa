"""Running the Node scripts in tests/e2e/node (the Vercel AI SDK's own code), installed by ``npm ci``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .servers import require

NODE_DIR = Path(__file__).resolve().parents[1] / "e2e" / "node"


def require_installed(package: str) -> Path:
    """``package``'s directory in tests/e2e/node/node_modules. Not installed: a skip, or under ``CI=true``
    a failure (.ci/run runs ``npm ci`` there)."""
    path = NODE_DIR / "node_modules" / package
    if not path.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"the {package} package is not installed (.ci/run runs npm ci in tests/e2e/node)")
        pytest.skip("run `npm ci` in tests/e2e/node")
    return path


def run_node(script: str, *args: str) -> dict[str, Any]:
    """``node script args...`` in tests/e2e/node; the JSON object it prints."""
    binary = require(shutil.which("node"), "node")
    require_installed("ai")
    done = subprocess.run(
        [binary, script, *args], cwd=NODE_DIR, capture_output=True, text=True, timeout=60, check=True
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result
