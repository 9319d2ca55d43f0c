"""Shared fixtures: tiny models and batches built in code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attnrepro import models

REPO = Path(__file__).resolve().parents[1]

TINY_PARAMS = {name: arch.tiny for name, arch in models.REGISTRY.items()}  # the registry's sizes
ATTENTION_ARCHS = tuple(sorted(models.ATTENTION_ARCHS))
SRC_VOCAB, TGT_VOCAB = 23, 19


def snakemake(workdir: Path, config: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """This repository's workflow run in `workdir` on `config` (replacing the default config)."""
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "-d", str(workdir)]
    return subprocess.run(
        command + ["--configfile", str(config), *args], capture_output=True, text=True, timeout=timeout
    )


def tiny_model(arch: str, seed: int = 0, tgt_vocab: int = TGT_VOCAB) -> torch.nn.Module:
    """A small randomly initialised model whose attention is not uniform (attnrepro.models.tiny_model)."""
    return models.tiny_model(arch, SRC_VOCAB, tgt_vocab, seed)


def rnnsearch10_config(tmp_path: Path, **train) -> Path:
    """config/test.yaml reduced to its rnnsearch10 model, `train` keys overridden, written to tmp_path."""
    import yaml

    raw = yaml.safe_load((REPO / "config/test.yaml").read_text())
    raw["models"] = {"rnnsearch10": raw["models"]["rnnsearch10"]}
    raw["models"]["rnnsearch10"]["train"].update(train)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(raw))
    return config


@pytest.fixture(params=sorted(TINY_PARAMS))
def arch(request) -> str:
    return request.param


@pytest.fixture(scope="session")
def test_config():
    from attnrepro.config import load_config

    return load_config(REPO / "config" / "test.yaml")


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory, test_config) -> Path:
    """config/test.yaml's corpus generated, tokenized and encoded: data/, tokenizer/, encoded/."""
    from attnrepro.data.synthetic import write_splits
    from attnrepro.data.tokenize import encode_corpus, load_tokenizer, train_tokenizers

    root = tmp_path_factory.mktemp("corpus")
    write_splits(test_config.synthetic, root / "data")
    train_tokenizers(test_config.tokenizer, root / "data/train.src", root / "data/train.tgt", root / "tokenizer")
    src_tok = load_tokenizer(test_config.tokenizer, root / "tokenizer/src.model")
    tgt_tok = load_tokenizer(test_config.tokenizer, root / "tokenizer/tgt.model")
    for split in ("train", "valid", "test"):
        encode_corpus(
            src_tok, tgt_tok, root / f"data/{split}.src", root / f"data/{split}.tgt", root / f"encoded/{split}.npz"
        )
    return root
