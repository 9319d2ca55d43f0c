"""The project's own error types: a problem the user can fix, named for people.

`attnrepro <verb>` prints an `AttnreproError` as one line naming the file, line or key, and
exits 1; any other exception is a bug and shows its traceback.
"""

from __future__ import annotations


class AttnreproError(Exception):
    """Bad input, named: a config key, a file and line, a URL. Never a bug of ours."""


class ConfigError(AttnreproError, ValueError):
    """A configuration that cannot work (names the key)."""


class DataError(AttnreproError, ValueError):
    """A data file that cannot be used (names the file and, where it applies, the line)."""


class TrainingError(AttnreproError):
    """Training that cannot go on as configured: a loss or weights that are no longer finite (names the step)."""
