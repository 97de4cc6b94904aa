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


def run_node(script: str, *args: str) -> dict[str, Any]:
    """``node script args...`` in tests/e2e/node; the JSON object it prints. Without the ``ai`` package
    installed: a skip, or under ``CI=true`` a failure (.ci/run installs it)."""
    binary = require(shutil.which("node"), "node")
    if not (NODE_DIR / "node_modules" / "ai").is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail("the ai package is not installed (.ci/run runs npm ci in tests/e2e/node)")
        pytest.skip("run `npm ci` in tests/e2e/node")
    done = subprocess.run(
        [binary, script, *args], cwd=NODE_DIR, capture_output=True, text=True, timeout=60, check=True
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result
