"""Shared fixtures: tiny models and batches built in code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attnrepro import models
from attnrepro.models import build_model

REPO = Path(__file__).resolve().parents[1]

TINY_PARAMS = {
    "rnnenc": {"emb": 8, "hidden": 12, "maxout": 6},
    "seq2seq": {"emb": 8, "hidden": 12, "layers": 2},
    "rnnsearch": {"emb": 8, "hidden": 12, "align": 10, "maxout": 6},
    "transducer": {"emb": 8, "hidden": 12},
    "diagonal": {"emb": 8, "hidden": 12, "maxout": 6, "length_ratio": 1.3, "width": 1.0},
    "graves_window": {"emb": 8, "hidden": 12, "maxout": 6, "components": 3},
    "graves_ntm": {"emb": 8, "hidden": 12, "maxout": 6},
    "memnet": {"dim": 8, "hidden": 12, "hops": 3},
    "transformer": {"d_model": 8, "d_ff": 16, "heads": 2, "layers": 2, "dropout": 0.0, "share_embeddings": False},
}
ATTENTION_ARCHS = tuple(sorted(models.ATTENTION_ARCHS))
SRC_VOCAB, TGT_VOCAB = 23, 19


def snakemake(workdir: Path, config: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """This repository's workflow run in `workdir` on `config` (replacing the default config)."""
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "-d", str(workdir)]
    return subprocess.run(
        command + ["--configfile", str(config), *args], capture_output=True, text=True, timeout=timeout
    )


def tiny_model(arch: str, seed: int = 0, tgt_vocab: int = TGT_VOCAB) -> torch.nn.Module:
    """A small randomly initialised model whose attention is not uniform (v_a starts at 0 in the paper)."""
    torch.manual_seed(seed)
    model = build_model(arch, SRC_VOCAB, tgt_vocab, TINY_PARAMS[arch])
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    return model.eval()


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
