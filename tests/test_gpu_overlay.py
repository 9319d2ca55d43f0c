"""config/overlays/multi30k_gpu.yaml: Multi30k on a GPU changes where each model runs and nothing it computes,
and plans end to end with the mirror named by a third config file."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from dataclasses import asdict

import yaml
from snakemake.utils import update_config

from attnrepro.config import from_dict

from conftest import REPO

OVERLAY = REPO / "config/overlays/multi30k_gpu.yaml"
BASE = REPO / "config/multi30k_en_de.yaml"


def _merged(*overlays: dict) -> dict:
    raw = yaml.safe_load(BASE.read_text())
    for overlay in overlays:
        update_config(raw, copy.deepcopy(overlay))  # what Snakemake does with several --configfile
    return raw


def test_every_model_trains_and_searches_on_cuda_and_nothing_else_changes():
    cpu, gpu = from_dict(_merged()), from_dict(_merged(yaml.safe_load(OVERLAY.read_text())))
    assert gpu.dataset == "multi30k_en_de_gpu" != cpu.dataset  # its own results folder
    assert list(gpu.models) == list(cpu.models) == list(yaml.safe_load(OVERLAY.read_text())["models"])  # every one
    for name, model in gpu.models.items():
        assert model.train.device == "cuda" and gpu.search_of(name).device == "cuda"
        same = cpu.model(name)
        assert asdict(model.train) | {"device": same.train.device} == asdict(same.train)  # the CPU run's training
        assert (model.arch, model.params, model.tokenizer) == (same.arch, same.params, same.tokenizer)
        assert model.resources.priority == same.resources.priority
        threads, trainings = model.resources.threads, len(gpu.models)  # side by side on the GPU node's 16 cores
        assert threads * trainings <= 16 < (threads + 1) * trainings  # as many threads each as fit
    assert asdict(gpu.search) | {"device": "auto"} == asdict(cpu.search)
    assert gpu.tokenizers == cpu.tokenizers and gpu.wmt == cpu.wmt  # the same data, tokenised alike


def test_it_plans_end_to_end_with_the_mirror_of_a_third_config_file(tmp_path):
    mirror = tmp_path / "mirror.yaml"
    (tmp_path / "multi30k").mkdir()  # the workflow checks that the folder exists when it is parsed
    mirror.write_text(yaml.safe_dump({"data": {"wmt": {"mirror": str(tmp_path / "multi30k")}}}))
    command = [sys.executable, "-m", "snakemake", "-n", "-s", str(REPO / "Snakefile"), "-d", str(tmp_path / "run")]
    out = subprocess.run(command + ["--configfile", str(BASE), str(OVERLAY), str(mirror)], capture_output=True,
                         text=True)  # fmt: skip
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    plan = out.stdout + out.stderr
    trained = set(re.findall(r"rule train:\n(?:    .*\n)*?    wildcards: model=(\w+)", plan))
    assert trained == {"rnnencdec", "rnnsearch", "transducer", "seq2seq", "transformer"}
    assert "results/multi30k_en_de_gpu/" in plan and "rule download:" in plan
    assert from_dict(
        _merged(yaml.safe_load(OVERLAY.read_text()), yaml.safe_load(mirror.read_text()))
    ).wmt.mirror == str(tmp_path / "multi30k")
