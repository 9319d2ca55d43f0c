"""Tables, figures and the HTML report through Snakemake itself, on one finished config/test.yaml run:
`snakemake figures` rebuilds them without training or translating, and `snakemake --report`
renders in headless Chromium with every figure and table present."""

from __future__ import annotations

import base64
import csv
import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ATTENTION_ARCHS, REPO

pytestmark = pytest.mark.slow

CONFIG = REPO / "config" / "test.yaml"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
REQUIRE_CHROMIUM = "ATTNREPRO_REQUIRE_CHROMIUM"  # set by .ci/run: there a missing chromium fails the test


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir)]
    return subprocess.run(command + list(args) + ["--configfile", str(CONFIG)], capture_output=True, text=True)


def job_counts(out: subprocess.CompletedProcess) -> dict[str, int]:
    text = out.stdout + out.stderr
    if "Job stats:" not in text:
        return {}
    counts = {}
    for line in text.split("Job stats:")[1].splitlines()[3:]:
        if not line.strip():
            break
        job, count = line.split()
        counts[job] = int(count)
    return counts


@pytest.fixture(scope="module")
def cfg() -> dict:
    return yaml.safe_load(CONFIG.read_text())


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    workdir = tmp_path_factory.mktemp("report_workflow")
    out = snakemake(workdir, "--cores", "2")
    assert out.returncode == 0, out.stderr[-4000:]
    return workdir / "results" / "synthetic_test"


def expected_figures(cfg: dict) -> list[str]:
    n = cfg["evaluate"]["n_alignments"]
    attention = [m for m, spec in cfg["models"].items() if spec["arch"] in ATTENTION_ARCHS]
    return ["figures/bleu_by_length.png", "figures/training_curves.png"] + [
        f"figures/alignment_{m}_{k}.png" for m in attention for k in range(n)
    ]


def test_tables_have_a_row_for_every_model_and_the_papers_numbers(finished_run, cfg):
    labels = {spec["label"] for spec in cfg["models"].values()}
    with open(finished_run / "tables/table1.csv") as f:
        table1 = list(csv.DictReader(f))
    ours = [r for r in table1 if r["model"]]
    assert {r["label"] for r in ours} == labels
    for row in ours:
        bleu = json.loads((finished_run / row["model"] / "bleu.json").read_text())
        assert float(row["all_tokenized"]) == bleu["bleu_tokenized"]
        assert float(row["all_sacrebleu"]) == bleu["bleu"]
        assert bleu["no_unk"]["applies"] is False and row["no_unk_tokenized"] == ""  # test.yaml: sentencepiece
    paper_only = {r["label"]: r for r in table1 if not r["model"]}
    assert float(paper_only["Moses (phrase-based SMT) (paper only)"]["all_paper"]) == 33.30
    assert "No UNK, paper" in (finished_run / "tables/table1.md").read_text()

    with open(finished_run / "tables/table2.csv") as f:
        table2 = {r["model"]: r for r in csv.DictReader(f)}
    assert set(table2) == set(cfg["models"])
    for model, row in table2.items():
        with open(finished_run / model / "train_log.csv") as f:
            last = list(csv.DictReader(f))[-1]
        tokens = int(last["src_tokens"]) + int(last["tgt_tokens"])
        assert int(row["tokens_seen"]) == tokens > 0
        assert int(row["steps"]) == int(last["step"]) == cfg["models"][model]["train"]["max_steps"]
        assert float(row["train_flops_estimate"]) == pytest.approx(6 * int(row["parameters"]) * tokens)
    assert "estimate" in (finished_run / "tables/table2.md").read_text()

    with open(finished_run / "tables/bleu_by_length.csv") as f:
        by_length = list(csv.DictReader(f))  # one row per run x bucket, each run's own numbers
    for model in cfg["models"]:
        with open(finished_run / model / "bleu_by_length.csv") as f:
            own = [r["bleu"] for r in csv.DictReader(f)]
        rows = [r for r in by_length if r["model"] == model]
        assert [r["bleu"] for r in rows] == own and {(r["base"], r["seed"]) for r in rows} == {(model, "1")}


def test_every_figure_is_a_png_and_models_without_attention_have_no_alignments(finished_run, cfg):
    for name in expected_figures(cfg):
        assert (finished_run / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    for stem in ("bleu_by_length", "training_curves"):
        assert (finished_run / f"figures/{stem}.pdf").read_bytes()[:5] == b"%PDF-"
    made = sorted(p.name for p in (finished_run / "figures").glob("alignment_*.png"))
    assert made == sorted(Path(n).name for n in expected_figures(cfg) if "alignment_" in n)
    without = [m for m, spec in cfg["models"].items() if spec["arch"] not in ATTENTION_ARCHS]
    assert without and not any(m in name for m in without for name in made)


def test_snakemake_figures_rebuilds_everything_without_training_or_translating(finished_run, cfg):
    workdir = finished_run.parents[1]
    products = [finished_run / "figures", finished_run / "tables", finished_run / "captions"]
    finished = {p: p.stat().st_mtime_ns for p in finished_run.glob("*/checkpoint.pt")}
    finished |= {p: p.stat().st_mtime_ns for p in finished_run.glob("*/hyp.txt")}
    for folder in products:
        shutil.rmtree(folder)

    plan = snakemake(workdir, "figures", "-n")
    assert plan.returncode == 0, plan.stderr[-4000:]
    n_attention = sum(spec["arch"] in ATTENTION_ARCHS for spec in cfg["models"].values())
    reasons = "\n".join(line for line in plan.stdout.splitlines() if "rule " in line or "reason:" in line)
    assert job_counts(plan) == {
        "tables": 1, "figure_length": 1, "figure_training": 1, "figure_alignments": n_attention, "figures": 1,
        "total": 4 + n_attention,
    }, reasons  # fmt: skip

    run = snakemake(workdir, "figures", "--cores", "2")
    assert run.returncode == 0, run.stderr[-4000:]
    assert "train" not in job_counts(run) and "translate" not in job_counts(run)
    assert {p: p.stat().st_mtime_ns for p in finished} == finished
    for name in expected_figures(cfg):
        assert (finished_run / name).exists(), name
    assert job_counts(snakemake(workdir, "figures", "-n")) == {}  # nothing left to do


def chromium() -> str:
    """Debian's chromium; skipped when absent, except under .ci/run, where it is installed."""
    path = shutil.which("chromium")
    if path is None:
        message = "chromium is not installed (Debian: apt-get install -y chromium; .ci/run installs it)"
        if os.environ.get(REQUIRE_CHROMIUM) == "1":
            pytest.fail(f"{REQUIRE_CHROMIUM}=1 but {message}")
        pytest.skip(message)
    return path


def test_the_html_report_renders_in_chromium_with_every_figure_and_table(finished_run, cfg, tmp_path):
    browser = chromium()
    workdir = finished_run.parents[1]
    report = workdir / "results" / "report.html"
    out = snakemake(workdir, "--report", str(report))
    assert out.returncode == 0, out.stderr[-4000:]

    # The report's own scripts, plus tests/report_check.js, which walks the app like a reader.
    page = report.read_text(encoding="utf-8")
    end = page.rindex("</body>")
    check = tmp_path / "report_check.html"
    check.write_text(page[:end] + "<script>" + (REPO / "tests/report_check.js").read_text() + "</script>" + page[end:])
    dom = subprocess.run(
        [browser, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=120000",
         "--dump-dom", check.as_uri()],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert dom.returncode == 0, dom.stderr[-4000:]
    found = re.search(r'<pre id="attnrepro-check">(.*?)</pre>', dom.stdout, re.S)
    assert found, "report_check.js did not finish: " + dom.stdout[-2000:]
    state = json.loads(html.unescape(found.group(1)))
    assert state["error"] is None, state["error"]
    assert state["loadingHidden"]  # the report's scripts all ran
    for section in ("Tables", "Figures", "Alignments (Fig. 3)"):
        assert section in state["navbar"]

    results = state["results"]
    figures = [f"results/synthetic_test/{name}" for name in expected_figures(cfg)]
    tables = [f"results/synthetic_test/tables/{t}.html" for t in ("table1", "table2", "bleu_by_length")]
    assert sorted(results) == sorted(figures + tables)
    for path in figures:  # decoded by the browser and drawn in the report's main pane
        shown = results[path]
        assert shown["complete"] and shown["naturalWidth"] > 300 and shown["naturalHeight"] > 300, path
        assert shown["shownWidth"] > 100, path
    for path in tables:  # shown in the main pane's frame
        assert results[path]["iframeHeight"] > 100, path
    for path, shown in results.items():  # every caption: the paper's side and ours
        assert "paper" in shown["info"] and "What we see" in shown["info"], path
    listed = "\n".join(state["categories"].values())
    for model, spec in cfg["models"].items():
        if spec["arch"] in ATTENTION_ARCHS:
            assert model in listed

    # The embedded tables are ours: every model's label and BLEU in Table 1.
    raw = json.loads(re.search(r'<script id="results">\s*var results = (.*?);\s*</script>', page, re.S).group(1))
    table1 = raw["results/synthetic_test/tables/table1.html"]["data_uri"]
    table1_html = base64.b64decode(table1.split("base64,", 1)[1]).decode()
    for model, spec in cfg["models"].items():
        bleu = json.loads((finished_run / model / "bleu.json").read_text())
        assert spec["label"] in table1_html and f"{bleu['bleu_tokenized']:.2f}" in table1_html
