"""The README's two set-up commands are the ones CI and users run."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from itertools import takewhile
from pathlib import Path

import pytest

from conftest import REPO

# every shipped config (not the download lock files beside them): README users dry-run each
CONFIGS = sorted(c for c in (REPO / "config").glob("*.yaml") if not c.name.endswith(".lock.yaml"))


def _commands() -> list[str]:
    """Command lines in the code blocks before the README's second section heading."""
    text = (REPO / "README.md").read_text()
    first_screen = text.split("\n## ")[0]
    blocks = first_screen.split("```")[1::2]
    lines = [line.strip() for block in blocks for line in block.splitlines()[1:]]  # [0]: the language tag
    return [line for line in lines if line and not line.startswith("#")]


def _snakemake_commands() -> list[list[str]]:
    """Every `snakemake ...` command the README shows, in its code blocks or inline, as an argument list."""
    text = (REPO / "README.md").read_text()
    parts = text.split("```")
    lines = [line.strip() for block in parts[1::2] for line in block.splitlines()[1:]]
    inline = [m for prose in parts[0::2] for m in re.findall(r"`(snakemake [^`]*)`", prose)]
    return [shlex.split(c, comments=True) for c in lines + inline if c.startswith("snakemake ")]


def _figures_with_a_config() -> list[str]:
    """The README's command for the figures of another config, on config/test.yaml."""
    shown = [c for c in _snakemake_commands() if "figures" in c and "--configfile" in c]
    if len(shown) != 1:  # collected all the same: the tests that use it fail, saying so
        return [f"the README shows {len(shown)} figures commands with --configfile, not one"]
    return ["config/test.yaml" if arg == "my.yaml" else arg for arg in shown[0][1:]]


def test_readme_snakemake_commands_name_no_target_after_configfile():
    """`--configfile` takes every word after it: `--configfile my.yaml figures` reads `figures` as a config
    file and ends in a traceback. Targets go first or after `--`; the README shows figures of another config."""
    commands = _snakemake_commands()
    assert "figures" in _figures_with_a_config()
    for command in commands:
        if "--configfile" in command:
            files = list(takewhile(lambda arg: not arg.startswith("-"), command[command.index("--configfile") + 1 :]))
            assert files and all(f.endswith((".yaml", ".json")) for f in files), shlex.join(command)


def test_readme_first_screen_has_the_two_commands():
    run, tests = _commands()[:2]
    assert run.endswith("snakemake --cores 2")
    assert "pip install torch==2.13.0" in run and "pip install torch==2.13.0" in tests
    assert tests.endswith("python -m pytest")


def test_readme_first_screen_has_the_first_look_and_the_smoke_run():
    """After the two set-up commands: Bahdanau's Fig. 2 in minutes, and the whole DAG on the toy config."""
    quick = [shlex.split(c, comments=True) for c in _commands()[2:]]
    assert ["snakemake", "--cores", "2", "--configfile", "config/first_look.yaml"] in quick
    assert ["snakemake", "--cores", "2", "--configfile", "config/test.yaml"] in quick


HEX_WORD = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")


def test_readme_is_a_guide_of_at_most_200_lines_naming_no_commit_outside_the_figure_caption():
    """Dated records and the commits they were measured at belong in docs/measurements.md; the README's one
    commit is the run behind its figure, named in the figure's caption (the paragraph after the image)."""
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    paragraphs = text.split("\n\n")
    figure = next(i for i, p in enumerate(paragraphs) if p.startswith("![") and "bleu_by_length.png" in p)
    caption = paragraphs[figure + 1]
    assert caption.startswith("*") and len(caption.splitlines()) <= 2, caption
    prose = "\n\n".join(paragraphs[: figure + 1] + paragraphs[figure + 2 :])
    assert not HEX_WORD.findall(prose), "the README names commits outside the figure caption"


def _links(path: Path) -> list[str]:
    """The relative targets of a Markdown file's links and images (no URLs, no anchors within the page)."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)  # code blocks hold no links
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    return [t.split("#")[0] for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


@pytest.mark.parametrize(
    "doc",
    ["README.md", "config/README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))],
)
def test_every_relative_link_resolves(doc):
    path = REPO / doc
    broken = [t for t in _links(path) if not (path.parent / t).exists()]
    assert not broken, f"{doc} links to files that do not exist: {broken}"


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (REPO / ".ci/run").read_text().splitlines()
    assert _commands()[1] in ci


@pytest.fixture(scope="module")
def readme_install(tmp_path_factory) -> Path:
    """A fresh virtualenv with README command 1's install alone (no test extras), and a tiny finished run
    made with it: returns the run's folder, whose .venv/bin holds the commands."""
    run = tmp_path_factory.mktemp("readme")
    steps = _commands()[0].split(" && ")
    assert steps[:2] == ["python3 -m venv .venv", ". .venv/bin/activate"] and steps[-1] == "snakemake --cores 2"
    venv = run / ".venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)  # not --system-site-packages
    install = subprocess.run(
        ["bash", "-c", " && ".join(steps[2:-1])], cwd=REPO, env=_env(venv), capture_output=True, text=True
    )
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    tiny = _run(venv, "snakemake", "--cores", "2", "--configfile", str(REPO / "config/test.yaml"), cwd=run)
    assert tiny.returncode == 0, tiny.stdout[-3000:]
    return run


def _env(venv: Path) -> dict[str, str]:
    """The environment of a shell that ran `. .venv/bin/activate`, without this test run's own Python path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    return {**env, "VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}{os.pathsep}{env['PATH']}"}


def _run(venv: Path, command: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    if command == "snakemake":
        args = ("--snakefile", str(REPO / "Snakefile"), *args)
    return subprocess.run([str(venv / "bin" / command), *args], cwd=cwd, env=_env(venv), capture_output=True, text=True)


@pytest.mark.slow
def test_readme_command_1_installs_no_executor_plugin(readme_install):
    """The SLURM plugin runs `scontrol show config` whenever Snakemake starts: only `.[slurm]` installs it."""
    python = readme_install / ".venv" / "bin" / "python"
    probe = subprocess.run([str(python), "-c", "import snakemake_executor_plugin_slurm"], capture_output=True)
    assert probe.returncode != 0


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "args", "expected"),
    [
        ("snakemake", ["--report", "results/report.html", "--configfile", "config/test.yaml"], "results/report.html"),
        # Snakemake 9 refuses a local run without --cores even when nothing is to be done
        ("snakemake", _figures_with_a_config(), "Nothing to be done"),  # as the README shows it
        ("attnrepro", ["params", "--config", "config/config.yaml", "--model", "rnnsearch50"], "rnnsearch50: rnnsearch"),
        ("attnrepro", ["estimate", "--config", "config/wmt14_en_fr.yaml"], "GPU-hours"),
        *[("snakemake", ["-n", "--configfile", f"config/{c.name}"], "This was a dry-run") for c in CONFIGS],
    ],
    ids=lambda v: v if isinstance(v, str) else " ".join(v),
)
def test_every_command_the_readme_shows_works_after_readme_command_1(readme_install, command, args, expected):
    """Each against the tiny finished run (dry runs in a folder of their own); config paths as in the README."""
    args = [str(REPO / a) if a.startswith("config/") else a for a in args]
    cwd = readme_install if "-n" not in args else readme_install / "plan"
    cwd.mkdir(exist_ok=True)
    out = _run(readme_install / ".venv", command, *args, cwd=cwd)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    if expected == "results/report.html":
        report = (cwd / expected).read_text()
        assert report.lower().startswith("<!doctype html>") and "bleu_by_length.png" in report
    else:
        assert expected in out.stdout + out.stderr


def test_the_readme_fig2_table_is_the_committed_band_table():
    """README's Fig. 2 table and docs/figures/bleu_by_length.csv (what `attnrepro compare` checks a run against)
    are the same numbers: mean [band_lo, band_hi] of every model and bucket."""
    import pandas as pd

    bands = pd.read_csv(REPO / "docs/figures/bleu_by_length.csv").set_index(["bucket_hi", "base"])
    bases = list(dict.fromkeys(bands.index.get_level_values("base")))
    text = (REPO / "README.md").read_text().split("## The result behind the figure")[1]
    rows = (re.match(r"\| \d+–(\d+) \|(.*)\|$", line) for line in text.splitlines())
    cells = {int(row[1]): [c.strip() for c in row[2].split("|")] for row in rows if row}
    assert sorted(cells) == sorted(set(bands.index.get_level_values("bucket_hi")))
    for hi, row in cells.items():
        expected = [f"{bands.loc[(hi, b), 'mean']:.1f} [{bands.loc[(hi, b), 'band_lo']:.1f}, "
                    f"{bands.loc[(hi, b), 'band_hi']:.1f}]" for b in bases]  # fmt: skip
        assert row == expected, hi
