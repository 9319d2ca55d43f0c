"""What a checkpoint records of the code that trained it: the package's git commit, so that tables which set
runs side by side can say when they come from different code (`evaluation.tables`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]  # src/attnrepro


def source_commit(package: Path = PACKAGE) -> str | None:
    """The commit of the checkout the package runs from (12 digits), with "+modified" when the package's
    tracked files differ from it; None when it is not run from a git checkout (an installed wheel)."""
    git = ["git", "-C", str(package)]
    try:
        head = subprocess.run([*git, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, timeout=30)
        if head.returncode != 0:
            return None
        changed = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no", "--", "."],
                                 capture_output=True, text=True, timeout=30)  # fmt: skip
    except (OSError, subprocess.SubprocessError):  # no git, or a git that hangs on a network file system
        return None
    return head.stdout.strip() + ("+modified" if changed.stdout.strip() else "")
