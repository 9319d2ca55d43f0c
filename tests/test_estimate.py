"""`attnrepro estimate`: C = 6 N D per model, GPU-hours at the stated throughput, and the
runtime every train job asks SLURM for."""

from __future__ import annotations

import csv
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from attnrepro.config import from_dict, load_config
from attnrepro.models import build_model, count_parameters
from attnrepro.training.estimate import RUNTIME_MARGIN, RUNTIME_OVERHEAD_MIN, estimate, vocab_sizes

from conftest import REPO


def _config(**edits) -> dict:
    raw = yaml.safe_load((REPO / "config/test.yaml").read_text())
    for path, value in edits.items():
        node = raw
        *parents, leaf = path.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return raw


def test_flops_are_six_times_parameters_times_tokens_of_the_whole_schedule():
    cfg = from_dict(_config())
    b = estimate(cfg, "rnnsearch10")
    src, tgt = vocab_sizes(cfg, "rnnsearch10")
    assert (src, tgt) == (120, 120)  # sentencepiece pieces include the specials
    real = count_parameters(build_model("rnnsearch", src, tgt, cfg.model("rnnsearch10").params))
    assert b.parameters == real  # the meta-device count is the allocated model's
    assert b.tokens == 20 * 400  # max_steps x batch_tokens
    assert b.train_flops == 6 * real * 20 * 400
    assert b.gpu_hours == pytest.approx(b.train_flops / 40e12 / 3600)


def test_an_update_of_update_tokens_counts_every_accumulated_batch():
    raw = _config(**{"models.rnnsearch10.train.update_tokens": 1000, "resources.throughput_tflops": 10.0})
    b = estimate(from_dict(raw), "rnnsearch10")
    assert b.tokens_per_update == 3 * 400  # ceil(1000 / 400) batches of 400 tokens
    assert b.gpu_hours == pytest.approx(b.train_flops / 10e12 / 3600)
    raw["models"]["rnnsearch10"]["resources"] = {"gpu": 4}
    four = estimate(from_dict(raw), "rnnsearch10")
    assert four.tokens_per_update == 4 * 400  # 3 batches rounded up to one per GPU
    assert four.wall_hours == pytest.approx(four.gpu_hours / 4)


def test_a_word_vocabulary_adds_its_four_specials():
    cfg = load_config(REPO / "config/config.yaml")
    assert vocab_sizes(cfg, "rnnsearch50") == (1004, 1004)


def test_the_runtime_is_the_configured_one_else_the_estimate_with_margin_capped():
    raw = _config(**{"resources.throughput_tflops": 1e-9})  # 1 kFLOP/s: 275 hours
    raw["models"]["rnnsearch10"]["resources"] = {"max_runtime": 100000}
    cfg = from_dict(raw)
    b = estimate(cfg, "rnnsearch10")
    assert b.runtime_min == math.ceil(b.wall_hours * 60 * RUNTIME_MARGIN) + RUNTIME_OVERHEAD_MIN > 2880
    assert estimate(cfg, "rnnencdec20").runtime_min == 2880  # the default cap, max_runtime
    raw["models"]["rnnsearch10"]["resources"]["runtime"] = 90
    assert estimate(from_dict(raw), "rnnsearch10").runtime_min == 90


def test_per_model_resources_override_single_top_level_keys():
    raw = _config(**{"resources.mem_mb": 3000, "resources.slurm_extra": ["--exclusive"]})
    raw["models"]["rnnsearch10"]["resources"] = {"gpu": 2, "gpu_model": "a100"}
    cfg = from_dict(raw)
    own, top = cfg.model("rnnsearch10").resources, cfg.model("rnnencdec20").resources
    assert (own.gpu, own.gpu_model, own.mem_mb, own.slurm_extra) == (2, "a100", 3000, ("--exclusive",))
    assert (top.gpu, top.gpu_model, top.mem_mb) == (0, None, 3000)


@pytest.mark.parametrize(
    "resources, key",
    [({"slurm_extra": ["exclusive"]}, "slurm_extra"), ({"gpu_model": "a100;ls"}, "gpu_model"), ({"gpus": 2}, "gpus")],
)
def test_bad_model_resources_are_rejected_naming_the_key(resources, key):
    raw = _config()
    raw["models"]["rnnsearch10"]["resources"] = resources
    with pytest.raises(Exception, match=key):
        from_dict(raw)


def test_vaswani_table_2_costs_bound_our_transformer_estimates():
    """Vaswani et al. 2017, Table 2 gives training cost as hours x GPUs x 9.5 TFLOPS (P100):
    3.3e18 (base), 2.3e19 (big). Actual work, 6 N D, must come out below and within 2x."""
    cfg = load_config(REPO / "config/wmt14_en_de.yaml")
    for model, paper in (("transformer_base", 3.3e18), ("transformer_big", 2.3e19)):
        flops = estimate(cfg, model).train_flops
        assert paper / 2 < flops < paper, (model, flops)


def test_the_cli_writes_budget_csv_under_the_dataset_tables(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "attnrepro.cli", "estimate", "--config", str(REPO / "config/test.yaml")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "results/synthetic_test/tables/budget.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["model"] for r in rows] == ["rnnencdec20", "rnnsearch10"]
    cfg = load_config(REPO / "config/test.yaml")
    for r in rows:
        b = estimate(cfg, r["model"])
        assert int(r["parameters"]) == b.parameters and int(r["runtime_min"]) == b.runtime_min
        assert float(r["train_flops"]) == pytest.approx(b.train_flops, rel=1e-3)
    assert "| **total** |" in done.stdout


def _planned_train_resources(workdir: Path, config: Path) -> dict[str, dict[str, str]]:
    """resources of each planned train job, as `snakemake -n` prints them."""
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir)]
        + ["-n", "--configfile", str(config)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    planned = {}
    for block in (out.stdout + out.stderr).split("\nrule train:")[1:]:
        model = re.search(r"wildcards: model=(\w+)", block).group(1)
        line = re.search(r"resources: (.*)", block).group(1)
        planned[model] = dict(item.split("=", 1) for item in line.split(", ") if "=" in item)
    return planned


@pytest.mark.slow
def test_each_train_job_asks_for_its_model_resources_and_the_estimated_runtime(tmp_path):
    raw = _config()
    raw["models"]["rnnsearch10"]["resources"] = {"gpu": 2, "mem_mb": 1500, "runtime": 30}
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(raw))
    planned = _planned_train_resources(tmp_path, config)
    cfg = from_dict(raw)
    estimated = estimate(cfg, "rnnencdec20").runtime_min
    assert planned["rnnencdec20"]["runtime"] == str(estimated) and planned["rnnencdec20"]["gpu"] == "0"
    assert planned["rnnencdec20"]["slurm_extra"].startswith(f"--signal=TERM@{estimated * 60 // 4} ")
    own = planned["rnnsearch10"]
    assert (own["gpu"], own["mem_mb"], own["runtime"]) == ("2", "1500", "30")
