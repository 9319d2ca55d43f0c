"""The whole DAG through Snakemake itself, on config/test.yaml."""

from __future__ import annotations

import csv
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from attnrepro.config import load_config
from attnrepro.decoding.attention_file import load_attention
from attnrepro.models import ATTENTION_ARCHS, REGISTRY

from conftest import REPO

pytestmark = pytest.mark.slow


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir)]
    return subprocess.run(command + list(args), capture_output=True, text=True)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    workdir = tmp_path_factory.mktemp("workflow")
    out = snakemake(workdir, "--cores", "2", "--configfile", str(REPO / "config/test.yaml"))
    assert out.returncode == 0, out.stderr[-4000:]
    return workdir / "results" / "synthetic_test"


def test_every_output_exists_and_parses(finished_run):
    results = finished_run
    cfg = yaml.safe_load((REPO / "config/test.yaml").read_text())
    models = list(cfg["models"])
    n_test = len((results / "data/test.src").read_text().splitlines())
    assert n_test == cfg["data"]["synthetic"]["test_per_bucket"] * 4  # 4 buckets up to 40 words
    for model in models:
        bleu = json.loads((results / model / "bleu.json").read_text())
        assert 0 <= bleu["bleu"] <= 100 and bleu["signature"].startswith("nrefs:1")
        assert bleu["n_sentences"] == n_test
        with open(results / model / "bleu_by_length.csv") as f:
            rows = list(csv.DictReader(f))
        assert [(int(r["bucket_lo"]), int(r["bucket_hi"])) for r in rows] == [(0, 10), (10, 20), (20, 30), (30, 40)]
        assert sum(int(r["n_sentences"]) for r in rows) == n_test
        assert len((results / model / "hyp.txt").read_text().splitlines()) == n_test
        with open(results / model / "train_log.csv") as f:
            log = list(csv.DictReader(f))
        assert int(log[-1]["step"]) == cfg["x-train"]["max_steps"]
        attention = load_attention(results / model / "attn.npz")
        assert len(attention) == n_test
        if cfg["models"][model]["arch"] == "rnnsearch":
            assert all(a.shape[1] > 0 for a in attention if a.shape[0] > 0)
        else:
            assert all(a.size == 0 for a in attention)
    with open(results / "tables/bleu_by_length.csv") as f:
        table = list(csv.DictReader(f))
    assert len(table) == 4 * len(models)
    assert {r["label"] for r in table} == {m["label"] for m in cfg["models"].values()}
    assert (results / "figures/bleu_by_length.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (results / "figures/bleu_by_length.pdf").read_bytes()[:5] == b"%PDF-"


def test_a_finished_run_has_nothing_left_to_do(finished_run):
    workdir = finished_run.parents[1]
    out = snakemake(workdir, "-n", "--configfile", str(REPO / "config/test.yaml"))
    assert out.returncode == 0
    assert "Nothing to be done" in out.stdout + out.stderr


def _edited_test_config(path: Path, edit) -> Path:
    raw = yaml.safe_load((REPO / "config/test.yaml").read_text())
    edit(raw)
    path.write_text(yaml.safe_dump(raw))
    return path


def _snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file under `folder`: its sha256 and mtime."""
    return {
        str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _planned_jobs(out: subprocess.CompletedProcess) -> set[tuple[str, str | None]]:
    """(rule, model wildcard or None) of every job a dry run lists."""
    jobs = set()
    for block in (out.stdout + out.stderr).split("\nrule ")[1:]:
        model = re.search(r"^    wildcards: .*model=(\w+)", block, re.M)
        jobs.add((block.split(":")[0], model.group(1) if model else None))
    return jobs


def test_a_dry_run_with_another_config_changes_nothing_under_results(finished_run, tmp_path):
    """The jobs of a running workflow read results/{dataset}/config.yaml: planning another config
    (here the same dataset at 10x the learning rate) used to rewrite it while the DAG was parsed."""
    workdir = finished_run.parents[1]
    before = _snapshot(workdir / "results")
    other = _edited_test_config(tmp_path / "other.yaml", lambda c: c["models"]["rnnsearch10"]["train"].update(lr=0.03))
    out = snakemake(workdir, "-n", "--configfile", str(other))
    assert out.returncode == 0, out.stdout[-3000:]
    assert ("train", "rnnsearch10") in _planned_jobs(out)  # the plan sees the edit; the files do not
    assert _snapshot(workdir / "results") == before
    assert yaml.safe_load((finished_run / "config.yaml").read_text())["models"]["rnnsearch10"]["train"]["lr"] == 0.003


def test_a_dry_run_from_another_directory_writes_no_results_folder_there(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "-s", str(REPO / "Snakefile")]
        + ["--configfile", str(REPO / "config/test.yaml")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout[-3000:]
    assert ("train", "rnnsearch10") in _planned_jobs(out)
    assert not (tmp_path / "results").exists()


def test_a_changed_learning_rate_retrains_that_model_and_what_depends_on_it_only(finished_run, tmp_path):
    workdir = finished_run.parents[1]
    other = _edited_test_config(tmp_path / "lr.yaml", lambda c: c["models"]["rnnsearch10"]["train"].update(lr=0.03))
    out = snakemake(workdir, "-n", "--configfile", str(other))
    assert out.returncode == 0, out.stdout[-3000:]
    per_model = {("train", "rnnsearch10"), ("translate", "rnnsearch10"), ("score", "rnnsearch10")}
    report = {("figure_alignments", "rnnsearch10"), ("tables", None), ("figure_length", None)}
    assert _planned_jobs(out) == per_model | report | {("figure_training", None), ("all", None)}


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda m: m.update(resources={"mem_mb": 9000, "priority": 3}), set()),  # used to retrain the model
        (
            lambda m: m.update(label="RNNsearch-ten"),
            {"score", "figure_alignments", "tables", "figure_length", "figure_training"},
        ),
    ],
)
def test_a_models_resources_or_label_never_retrain_it(finished_run, tmp_path, edit, expected):
    workdir = finished_run.parents[1]
    other = _edited_test_config(tmp_path / "other.yaml", lambda c: edit(c["models"]["rnnsearch10"]))
    out = snakemake(workdir, "-n", "--configfile", str(other))
    assert out.returncode == 0, out.stdout[-3000:]
    assert {rule for rule, _ in _planned_jobs(out)} - {"all"} == expected


def test_planning_every_job_imports_neither_torch_nor_matplotlib(tmp_path):
    """Parsing the DAG used to import torch (estimate -> training loop) and matplotlib (plots), seconds of
    every `snakemake` call. With resources.runtime unset, a pending train job's runtime is still the
    estimate, which builds the model on torch's meta device: here the runtime is given."""
    config = _edited_test_config(tmp_path / "runtime.yaml", lambda c: c.update(resources={"runtime": 30}))
    command = [sys.executable, "-X", "importtime", "-m", "snakemake", "-n", "-s", str(REPO / "Snakefile")]
    out = subprocess.run(command + ["--configfile", str(config)], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:]
    assert ("train", "rnnsearch10") in _planned_jobs(out)
    imported = {line.rsplit("|", 1)[1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    assert "attnrepro.config" in imported
    assert not {"torch", "matplotlib"} & imported


def test_a_figure_job_draws_the_alignments_without_importing_torch(finished_run, tmp_path):
    """Seven figure jobs each spent 3 s of their 11 importing torch to read a numpy file."""
    results, model = finished_run, "rnnsearch10"
    code = (
        "import sys; from attnrepro.cli import main; main(sys.argv[1:]); "
        "print('torch imported' if 'torch' in sys.modules else 'numpy only')"
    )
    args = ["figure-alignments", "--config", str(results / "config.yaml"), "--model", model]
    args += ["--attention", str(results / model / "attn.npz"), "--hyp", str(results / model / "hyp.txt")]
    args += ["--src", str(results / "data/test.src"), "--tokenizer-dir", str(results / "tokenizer/spm")]
    args += ["--figure", str(tmp_path / "alignment"), "--caption", str(tmp_path / "caption.rst")]
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    n = yaml.safe_load((REPO / "config/test.yaml").read_text())["evaluate"]["n_alignments"]
    assert sorted(p.name for p in tmp_path.glob("alignment_*.png")) == [f"alignment_{k}.png" for k in range(n)]
    assert out.stdout.strip().splitlines()[-1] == "numpy only"


def test_the_embedded_default_plans_every_job(tmp_path):
    out = snakemake(tmp_path, "-n")
    assert out.returncode == 0, out.stderr[-4000:]
    counts = {}
    for line in (out.stdout + out.stderr).split("Job stats:")[1].splitlines()[3:]:
        if not line.strip():
            break
        job, count = line.split()
        counts[job] = int(count)
    cfg = load_config(REPO / "config/config.yaml")
    n_models = len(cfg.models)
    n_attention = sum(m.arch in ATTENTION_ARCHS for m in cfg.models.values())
    per_run = {
        "generate": 1,
        "tokenizer": 1,
        "encode": 2,
        "all": 1,
        "tables": 1,
        "figure_length": 1,
        "figure_training": 1,
    }
    expected = per_run | {"train": n_models, "translate": n_models, "score": n_models, "figure_alignments": n_attention}
    assert counts == expected | {"total": sum(expected.values())}
    raw = yaml.safe_load((REPO / "config/config.yaml").read_text())
    assert {m.base for m in cfg.models.values()} == set(raw["models"])
    assert {m.arch for m in cfg.models.values()} == set(REGISTRY)  # every family of the history
    assert n_models == len(raw["models"]) * len(raw["seeds"]) > len(REGISTRY)  # every model once per seed
    assert 0 < n_attention < n_models  # the alignment figures: models that attend, not the fixed-vector ones


def test_snakemake_lint_is_clean():
    out = subprocess.run([sys.executable, "-m", "snakemake", "--lint"], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("wmt14_en_fr.yaml", {"download": 8, "extract": 14, "clean": 4, "tokenizer": 3, "encode": 6}),
        ("wmt14_en_de.yaml", {"download": 5, "extract": 5, "clean": 3, "tokenizer": 3, "encode": 6}),
    ],
)
def test_the_wmt_configs_plan_download_to_report_for_every_model_offline(tmp_path, config, expected):
    out = snakemake(tmp_path, "-n", "--configfile", str(REPO / "config" / config))
    assert out.returncode == 0, out.stderr[-4000:]
    counts = {}
    for line in (out.stdout + out.stderr).split("Job stats:")[1].splitlines()[3:]:
        if not line.strip():
            break
        job, count = line.split()
        counts[job] = int(count)
    n_models = len(yaml.safe_load((REPO / "config" / config).read_text())["models"])
    assert {job: counts[job] for job in expected} == expected
    assert counts["train"] == counts["translate"] == counts["score"] == n_models >= len(REGISTRY)  # every arch
    assert not (tmp_path / "results" / "downloads").exists()  # planning fetched nothing
