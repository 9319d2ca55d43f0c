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
import torch
import yaml

import attnrepro.models
from attnrepro.config import from_dict, load_config
from attnrepro.errors import ConfigError
from attnrepro.models import REGISTRY, build_model, count_parameters, parameter_count
from attnrepro.training.estimate import RUNTIME_MARGIN, RUNTIME_OVERHEAD_MIN, estimate, grid_bill, vocab_sizes

from conftest import REPO, SRC_VOCAB, TGT_VOCAB, TINY_PARAMS


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


@pytest.mark.parametrize("arch", sorted(REGISTRY))
def test_the_count_without_weights_is_the_count_of_the_model_with_them(arch):
    real = build_model(arch, SRC_VOCAB, TGT_VOCAB, TINY_PARAMS[arch])  # allocated, initialised, on the CPU
    assert parameter_count(arch, SRC_VOCAB, TGT_VOCAB, TINY_PARAMS[arch]) == count_parameters(real)


@pytest.mark.parametrize("config", ["wmt14_en_fr", "wmt14_en_de"])
def test_the_papers_models_count_as_they_did_built_and_initialised_on_meta(config):
    cfg = load_config(REPO / f"config/{config}.yaml")
    for name, mc in cfg.models.items():
        vocabs = vocab_sizes(cfg, name)
        with torch.device("meta"):  # the count before it skipped initialisation (a real seq2seq: 1.5 GB)
            initialised = count_parameters(build_model(mc.arch, *vocabs, mc.params))
        assert parameter_count(mc.arch, *vocabs, mc.params) == initialised, name


def test_a_dry_run_builds_each_model_once(monkeypatch):
    """The train rule asks each job's runtime twice (resources.runtime, slurm_extra); models of the same
    arch, vocabularies and params (RNNsearch-30 and -50) are one build."""
    cfg = load_config(REPO / "config/wmt14_en_fr.yaml")
    builds = []

    def counted_build(arch, src_vocab, tgt_vocab, params):
        builds.append((arch, src_vocab, tgt_vocab, repr(sorted(params.items()))))
        return build_model(arch, src_vocab, tgt_vocab, params)

    attnrepro.models._parameter_count.cache_clear()
    monkeypatch.setattr(attnrepro.models, "build_model", counted_build)
    first = {name: estimate(cfg, name).parameters for name in cfg.models}
    assert {name: estimate(cfg, name).parameters for name in cfg.models} == first
    models = {(cfg.model(n).arch, *vocab_sizes(cfg, n), repr(sorted(cfg.model(n).params.items()))) for n in cfg.models}
    assert sorted(builds) == sorted(models)  # each once
    assert len(builds) < len(cfg.models)


def test_counting_initialises_no_weights():
    """nn.init on meta tensors imports torch._dynamo (~1 s of a dry run, docs/measurements.md)."""
    script = (
        "import sys, torch; assert 'torch._dynamo' not in sys.modules;"
        "from attnrepro.models import parameter_count;"
        "parameter_count('rnnsearch', 30004, 30004, {'emb': 620, 'hidden': 1000, 'align': 1000, 'maxout': 500});"
        "print('torch._dynamo' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


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
    assert vocab_sizes(cfg, "rnnsearch50_seed1") == (1004, 1004)


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


MEASURED = {"tokens_per_s": 2000.0, "gpu": "NVIDIA H100 80GB HBM3", "source": "a test"}


def test_a_measured_model_is_priced_from_its_tokens_per_second_the_others_from_the_guess():
    raw = _config(**{"resources.throughput_tflops": 10.0})
    raw["models"]["rnnsearch10"]["resources"] = {"measured": MEASURED | {"train": {"precision": "bf16"}}}
    cfg = from_dict(raw)
    b = estimate(cfg, "rnnsearch10")
    assert b.gpu_hours == pytest.approx(20 * 400 / 2000.0 / 3600)  # tokens of the schedule / measured tokens/s
    assert b.throughput_tflops == pytest.approx(b.train_flops / (b.gpu_hours * 3600) / 1e12)
    assert b.priced_from == "measured: 2 k tokens/s on NVIDIA H100 80GB HBM3"
    assert b.notes == ("train.precision: measured with 'bf16', configured 'fp32'",)
    guessed = estimate(cfg, "rnnencdec20")
    assert guessed.priced_from == "10 TFLOP/s (not measured)" and guessed.notes == ()
    assert guessed.gpu_hours == pytest.approx(guessed.train_flops / 10e12 / 3600)
    raw["models"]["rnnsearch10"]["resources"] = {"measured": MEASURED, "gpu": 4}
    four = estimate(from_dict(raw), "rnnsearch10")
    assert four.wall_hours == pytest.approx(four.gpu_hours / 4)  # measured per GPU, scaled linearly


@pytest.mark.parametrize(
    "where, measured, key",
    [
        ("model", {"tokens_per_s": 2000.0, "gpu": "H100"}, "source"),  # a number without its source
        ("model", MEASURED | {"train": {"lr": 1.0}}, "lr"),  # only settings that change the speed
        ("top", MEASURED, "measured"),  # a measurement prices one model, never every model
    ],
)
def test_a_measurement_needs_its_source_and_belongs_to_one_model(where, measured, key):
    raw = _config()
    if where == "top":
        raw["resources"] = {"measured": measured}
    else:
        raw["models"]["rnnsearch10"]["resources"] = {"measured": measured}
    with pytest.raises(Exception, match=key):
        from_dict(raw)


def test_the_wmt14_en_de_transformer_base_is_priced_from_the_h200_measurement():
    cfg = load_config(REPO / "config/wmt14_en_de.yaml")
    b = estimate(cfg, "transformer_base")
    assert b.priced_from.startswith("measured: 518 k tokens/s on NVIDIA H200")
    assert b.gpu_hours == pytest.approx(100000 * 50000 / 518000 / 3600)
    assert any("train.precision" in note for note in b.notes)  # measured in bf16; the config trains fp32
    assert estimate(cfg, "rnnsearch50").priced_from == "40 TFLOP/s (not measured)"


def test_vaswani_table_2_costs_bound_our_transformer_estimates():
    """Vaswani et al. 2017, Table 2 gives training cost as hours x GPUs x 9.5 TFLOPS (P100):
    3.3e18 (base), 2.3e19 (big). Actual work, 6 N D, must come out below and within 2x."""
    cfg = load_config(REPO / "config/wmt14_en_de.yaml")
    for model, paper in (("transformer_base", 3.3e18), ("transformer_big", 2.3e19)):
        flops = estimate(cfg, model).train_flops
        assert paper / 2 < flops < paper, (model, flops)


def _attnrepro(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The `attnrepro` console script of this environment (README command 2 installs it)."""
    script = Path(sys.executable).with_name("attnrepro")
    return subprocess.run([str(script), *args], cwd=cwd, capture_output=True, text=True)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_estimate_is_a_query_that_writes_nothing_and_says_a_long_run_continues_across_requeued_jobs(tmp_path):
    """Issue 26, item 8: `attnrepro estimate` wrote results/{dataset}/tables/budget.csv as a side effect, and printed
    seq2seq's 2 880-min time limit below its 78.8 GPU-hours without saying that the run continues across jobs."""
    old = tmp_path / "results/wmt14_en_fr/tables/budget.csv"
    old.parent.mkdir(parents=True)
    old.write_text("model\nan earlier bill\n")
    before = _tree(tmp_path)
    done = _attnrepro("estimate", "--config", str(REPO / "config/wmt14_en_fr.yaml"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert _tree(tmp_path) == before  # nothing under results/ written or changed
    b = estimate(load_config(REPO / "config/wmt14_en_fr.yaml"), "seq2seq")
    jobs = math.ceil(b.wall_hours * 60 / (b.runtime_min - 10))  # each job checkpoints signal_s (600 s) early
    assert b.runtime_min == 2880 and jobs >= 2
    line = (
        f"seq2seq: {b.wall_hours:,.1f} h on 1 GPU exceed one job's 2,880-min time limit: the run continues across "
        f"about {jobs} requeued jobs"
    )
    assert line in done.stdout.splitlines()


def test_estimate_out_writes_the_table_as_csv(tmp_path):
    done = _attnrepro("estimate", "--config", str(REPO / "config/test.yaml"), "--out", "bill.csv", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "bill.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["model"] for r in rows] == ["rnnencdec20", "rnnsearch10"]
    cfg = load_config(REPO / "config/test.yaml")
    for r in rows:
        b = estimate(cfg, r["model"])
        assert int(r["parameters"]) == b.parameters and int(r["runtime_min"]) == b.runtime_min
        assert float(r["train_flops"]) == pytest.approx(b.train_flops, rel=1e-3)
    assert "| **total** |" in done.stdout and not (tmp_path / "results").exists()


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


def test_the_bill_of_both_wmt_grids_is_each_models_estimate_and_their_sums():
    """docs/cluster.md's bill (written by `attnrepro regenerate bill`, checked by test_regenerate): one row per
    model with each grid's value where they differ, and totals that are the sums of the rows."""
    fr, de = load_config(REPO / "config/wmt14_en_fr.yaml"), load_config(REPO / "config/wmt14_en_de.yaml")
    lines = grid_bill(fr, de).splitlines()
    rows = {line.split(" | ")[0].strip("| `"): line.strip("|").split(" | ") for line in lines[2 : 2 + len(fr.models)]}
    assert list(rows) == list(fr.models)
    for name, row in rows.items():
        a, b = estimate(fr, name), estimate(de, name)
        priced = a.priced_from if a.priced_from == b.priced_from else f"{a.priced_from} / {b.priced_from}"
        assert row[-5:-2] == [priced, f"{a.gpu_hours:,.1f}", f"{b.gpu_hours:,.1f}"], name
    assert rows["seq2seq"][2] == "703,125 / 264,880" and rows["rnnsearch50"][2] == "300,000"  # a / b where they differ
    hours = [sum(estimate(cfg, n).gpu_hours for n in cfg.models) for cfg in (fr, de)]
    assert lines[2 + len(fr.models)] == (
        f"| **total** | | | | {sum(estimate(fr, n).train_flops for n in fr.models):.2g} | "
        f"| **{hours[0]:,.1f}** | **{hours[1]:,.1f}** | | |"
    )
    measured = sum(estimate(cfg, n).priced_from.startswith("measured") for cfg in (fr, de) for n in cfg.models)
    trainings = len(fr.models) + len(de.models)
    assert lines[-1].startswith(f"Both grids together: **{sum(hours):,.0f} GPU-hours**; {measured} of the {trainings} ")
    with pytest.raises(ConfigError, match="must train the same models for one bill"):
        grid_bill(fr, load_config(REPO / "config/test.yaml"))
