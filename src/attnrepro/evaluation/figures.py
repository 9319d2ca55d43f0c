"""The figures of a finished run, each written with the "what we see" part of its report caption:
Fig. 2 (BLEU by length, every model), Fig. 3 (one model's alignments), training curves.
`plots.py` draws; this module reads the run's files and decides what to draw."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from attnrepro.config import Config
from attnrepro.data.text import read_lines
from attnrepro.errors import ConfigError, DataError
from attnrepro.evaluation import captions as cap
from attnrepro.evaluation.aggregate import bleu_by_length_aggregate
from attnrepro.evaluation.papers import fig2_paper_points, is_full_run_of, paper_numbers
from attnrepro.evaluation.plots import (
    alignment_figure,
    bleu_by_length_figure,
    save,
    select_alignment_sentences,
    training_curves_figure,
)
from attnrepro.evaluation.runs import TrainingLogs, read_bleu_by_length, read_checkpoints, training_length
from attnrepro.evaluation.scoring import LENGTH_BLEU
from attnrepro.evaluation.tables import DIVERGED
from attnrepro.models import has_attention


def base_models(cfg: Config) -> dict[str, list[str]]:
    """Configured model -> its runs (one per seed; without seeds, the model itself)."""
    runs: dict[str, list[str]] = {}
    for name, m in cfg.models.items():
        runs.setdefault(m.base, []).append(name)
    return runs


def legends(cfg: Config, results: Path, training: TrainingLogs) -> dict[str, str]:
    """Configured model -> "label (how its runs were trained: length limit, where and why they stopped)",
    DIVERGED after the label of a model one of whose runs diverged. Every run's checkpoint is checked against
    the config and its log (`runs.read_checkpoints`)."""
    texts = {}
    checkpoints = read_checkpoints(cfg, results, training)
    for base, runs in base_models(cfg).items():
        model = cfg.model(runs[0])
        mark = DIVERGED if set(runs) & set(training.diverged) else ""
        texts[base] = f"{model.label}{mark} ({training_length(model, [checkpoints[run] for run in runs])})"
    for run, why in training.diverged.items():  # in the figure job's log, and on the terminal of `attnrepro figure-*`
        print(f"WARNING: {run}: training diverged: {why}; marked{DIVERGED} in the legend", file=sys.stderr)
    return texts


def dashed(cfg: Config) -> list[str]:
    """Models without attention, and their runs (drawn dashed in every figure)."""
    return list(dict.fromkeys(n for name, m in cfg.models.items() if not has_attention(m.arch) for n in (m.base, name)))


def write_bleu_by_length_figure(
    cfg: Config,
    results: Path,
    out_stem: Path,
    caption: Path,
    training: TrainingLogs,
    papers: dict[str, Any] | None = None,
) -> None:
    """Fig. 2 as out_stem.{png,pdf}, a line per configured model (the mean of its runs with seeds); the
    paper's points only on a full run of the paper's dataset."""
    papers = paper_numbers() if papers is None else papers
    table = bleu_by_length_aggregate(read_bleu_by_length(cfg, results))
    texts = legends(cfg, results, training)
    fig2 = papers["bahdanau2014_fig2"]
    full_run = is_full_run_of(cfg, fig2["dataset"])
    points = fig2_paper_points(cfg, papers)
    title = f"BLEU by source sentence length, {cfg.dataset} test set\n(cf. Bahdanau et al. 2014, Fig. 2)"
    metric = LENGTH_BLEU[cfg.evaluate.length_bleu]
    save(bleu_by_length_figure(table, texts, title, dashed(cfg), points, metric), out_stem)
    findings = cap.bleu_by_length_findings(table, texts)
    if not points:
        findings.append(
            "No paper points are drawn: "
            + (
                "the paper gives Fig. 2 as curves only (no per-length numbers in docs/papers.md)."
                if full_run
                else f"this is not a full {fig2['dataset']} run."
            )
        )
    caption.parent.mkdir(parents=True, exist_ok=True)
    caption.write_text(cap.bullets(findings), encoding="utf-8")


def token_strings(tokenizer: Any, line: str) -> list[str]:
    """The tokens a model saw for `line`, one per id: words (unknown ones marked) or sentencepiece pieces."""
    from attnrepro.data.tokenize import UNK, UNK_WORD, WordVocab

    ids = tokenizer.encode(line)
    if hasattr(tokenizer, "tokenize"):  # Moses word path
        words = tokenizer.tokenize(line)
    elif isinstance(tokenizer, WordVocab):
        words = line.split()
    else:
        return tokenizer.pieces(ids)
    # a hypothesis's unknown word is written UNK_WORD already: mark only real words the vocabulary lacks
    return [f"{w} (UNK)" if i == UNK and w not in ("<unk>", UNK_WORD) else w for w, i in zip(words, ids)]


def alignment_sentences(cfg: Config, test_src: Path) -> list[int]:
    sources = read_lines(test_src)
    return select_alignment_sentences(sources, cfg.evaluate.n_alignments)


def write_alignments(
    cfg: Config,
    model: str,
    attention: Path,
    hyp: Path,
    test_src: Path,
    tokenizer_dir: Path,
    out_stem: Path,
    caption: Path,
) -> list[Path]:
    """Fig. 3: one heatmap per selected test sentence, out_stem_{k}.png for k = 0 .. n_alignments-1."""
    from attnrepro.data.tokenize import load_tokenizer_pair
    from attnrepro.decoding.attention_file import load_attention

    mc = cfg.model(model)
    if not has_attention(mc.arch):
        raise ConfigError(f"models.{model}: arch {mc.arch!r} has no attention to plot")
    src_tok, tgt_tok = load_tokenizer_pair(cfg.tokenizer_of(model), tokenizer_dir, cfg.languages)
    sources = read_lines(test_src)
    hypotheses = read_lines(hyp)
    weights = load_attention(attention)
    if not len(sources) == len(hypotheses) == len(weights):
        raise DataError(f"{test_src}, {hyp}, {attention}: {len(sources)}, {len(hypotheses)}, {len(weights)} sentences")
    paths, described = [], []
    for k, index in enumerate(alignment_sentences(cfg, test_src)):
        w = weights[index]
        src_tokens = token_strings(src_tok, sources[index])
        tgt_tokens = token_strings(tgt_tok, hypotheses[index])
        if len(tgt_tokens) != w.shape[0]:  # a subword re-encoding may differ from the searched pieces
            tgt_tokens = [f"#{i + 1}" for i in range(w.shape[0])]
        if w.size and len(src_tokens) != w.shape[1]:
            raise DataError(f"{attention}: sentence {index + 1} has {w.shape[1]} source positions, "
                             f"the tokenizer gives {len(src_tokens)}")  # fmt: skip
        if w.size == 0:
            src_tokens, tgt_tokens = [], []
            w = np.zeros((0, 0))
        words = len(sources[index].split())
        title = f"{mc.label}: test sentence {index + 1} ({words} source words)"
        paths += save(alignment_figure(w, src_tokens, tgt_tokens, title), Path(f"{out_stem}_{k}"), (".png",))
        described.append((index, words, w))
    caption.parent.mkdir(parents=True, exist_ok=True)
    caption.write_text(cap.bullets(cap.alignment_findings(mc.label, described)), encoding="utf-8")
    return paths


def write_training_curves(cfg: Config, results: Path, out_stem: Path, caption: Path, training: TrainingLogs) -> None:
    """Every run's training and validation curves, a colour and legend entry per configured model."""
    logs = training.logs
    groups = {name: m.base for name, m in cfg.models.items()}
    title = f"Training curves, {cfg.dataset}"
    save(training_curves_figure(logs, legends(cfg, results, training), title, dashed(cfg), groups), out_stem)
    caption.parent.mkdir(parents=True, exist_ok=True)
    labels = {name: m.label + (DIVERGED if name in training.diverged else "")
              + (f" (seed {m.train.seed})" if name != m.base else "") for name, m in cfg.models.items()}  # fmt: skip
    caption.write_text(cap.bullets(cap.training_findings(logs, labels)), encoding="utf-8")
