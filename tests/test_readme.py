"""The README's two set-up commands are the ones CI and users run."""

from __future__ import annotations

from conftest import REPO


def _commands() -> list[str]:
    """Command lines in the code blocks before the README's second section heading."""
    text = (REPO / "README.md").read_text()
    first_screen = text.split("\n## ")[0]
    blocks = first_screen.split("```")[1::2]
    lines = [line.strip() for block in blocks for line in block.splitlines()[1:]]  # [0]: the language tag
    return [line for line in lines if line and not line.startswith("#")]


def test_readme_first_screen_has_the_two_commands():
    run, tests = _commands()
    assert run.endswith("snakemake --cores 2")
    assert "pip install torch==2.13.0" in run and "pip install torch==2.13.0" in tests
    assert tests.endswith("python -m pytest")


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (REPO / ".ci/run").read_text().splitlines()
    assert _commands()[1] in ci
