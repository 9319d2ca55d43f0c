"""ruff is part of the test command, so a style regression fails CI like any other."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO


def test_ruff_check_is_clean():
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout


def test_ruff_format_is_clean():
    out = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "."], cwd=REPO, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout
