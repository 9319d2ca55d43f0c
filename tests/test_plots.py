"""Figures: what each one draws (checked on the matplotlib Figure), and which sentences Fig. 3 shows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from attnrepro.data.tokenize import UNK, WordVocab
from attnrepro.evaluation.plots import (
    alignment_figure,
    bleu_by_length_figure,
    save,
    select_alignment_sentences,
    training_curves_figure,
)
from attnrepro.evaluation.report import token_strings


def length_table() -> pd.DataFrame:
    rows = []
    for model, bleus in (("enc", [30.0, 10.0, 2.0]), ("search", [32.0, 31.0, 30.0])):
        for (lo, hi), bleu in zip([(0, 10), (10, 20), (20, 30)], bleus):
            rows.append({"model": model, "label": model, "bucket_lo": lo, "bucket_hi": hi, "bleu": bleu})
    return pd.DataFrame(rows)


def test_fig2_draws_one_line_per_model_with_its_legend_and_style(tmp_path):
    legends = {"enc": "RNNencdec-30 (trained on ≤30 words, 100 steps)", "search": "RNNsearch-30 (trained on ≤30 words)"}
    fig = bleu_by_length_figure(length_table(), legends, "title", dashed=["enc"])
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == list(legends.values())
    enc, search = ax.get_lines()
    assert enc.get_linestyle() == "--" and search.get_linestyle() == "-"
    assert list(enc.get_xdata()) == [5.5, 15.5, 25.5] and list(search.get_ydata()) == [32.0, 31.0, 30.0]
    assert [int(t) for t in ax.get_xticks()] == [0, 10, 20, 30]
    assert "source words" in ax.get_xlabel() and "BLEU" in ax.get_ylabel()
    png, pdf = save(fig, tmp_path / "fig2")
    assert png.read_bytes()[:4] == b"\x89PNG" and pdf.read_bytes()[:5] == b"%PDF-"


def test_fig2_draws_paper_points_only_when_given():
    fig = bleu_by_length_figure(length_table(), {}, "t", paper_points={"paper: RNNsearch-50": [[10, 26.0], [20, 25.0]]})
    lines = fig.axes[0].get_lines()
    assert len(lines) == 3 and list(lines[2].get_ydata()) == [26.0, 25.0]
    assert "paper: RNNsearch-50" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert len(bleu_by_length_figure(length_table(), {}, "t").axes[0].get_lines()) == 2


def test_alignment_sentences_have_spread_out_lengths_and_are_fixed():
    sources = [" ".join(["w"] * n) for n in [1, 2, 5, 5, 9, 14, 20, 33, 40, 61, 80]]
    chosen = select_alignment_sentences(sources, 4)
    assert chosen == select_alignment_sentences(list(sources), 4)
    lengths = [len(sources[i].split()) for i in chosen]
    assert lengths == [5, 14, 33, 40]  # targets 5, 16.7, 28.3, 40 (capped at 40 words); first of each length
    assert chosen[0] == 2
    assert len(set(select_alignment_sentences(["a b c"] * 3, 5))) == 3  # never the same sentence twice
    assert select_alignment_sentences(sources, 0) == []


def test_alignment_heatmap_rows_are_target_tokens_columns_source_tokens():
    weights = np.array([[0.9, 0.1, 0.0], [0.2, 0.7, 0.1]])
    fig = alignment_figure(weights, ["the", "cat", "sat"], ["le", "chat"], "t")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["the", "cat", "sat"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["le", "chat"]
    np.testing.assert_array_equal(ax.get_images()[0].get_array(), weights)
    assert ax.get_images()[0].get_clim() == (0.0, 1.0)
    with pytest.raises(ValueError, match="2x3"):
        alignment_figure(weights, ["the", "cat"], ["le", "chat"], "t")
    empty = alignment_figure(np.zeros((0, 0)), [], [], "t")
    assert "empty translation" in empty.axes[0].texts[0].get_text()


def test_token_strings_mark_unknown_words():
    vocab = WordVocab.build(["a b c"], 10)
    assert vocab.encode("a zz c")[1] == UNK
    assert token_strings(vocab, "a zz c") == ["a", "zz (UNK)", "c"]
    assert token_strings(vocab, "a <unk> c") == ["a", "<unk>", "c"]


def test_training_curves_add_a_valid_bleu_panel_only_when_logged():
    log = pd.DataFrame({"step": [1, 2, 3], "loss": [3.0, 2.0, 1.0], "valid_loss": [None, 2.5, 1.5]})
    fig = training_curves_figure({"m": log, "n": log}, {"m": "M", "n": "N"}, "t", dashed=["n"])
    assert len(fig.axes) == 2
    loss_m, loss_n = fig.axes[0].get_lines()
    assert list(loss_m.get_ydata()) == [3.0, 2.0, 1.0] and loss_n.get_linestyle() == "--"
    assert list(fig.axes[1].get_lines()[0].get_xdata()) == [2, 3]  # validation rows only
    with_bleu = log.assign(valid_bleu=[None, 10.0, 20.0])
    fig = training_curves_figure({"m": with_bleu}, {"m": "M"}, "t")
    assert len(fig.axes) == 3 and list(fig.axes[2].get_lines()[0].get_ydata()) == [10.0, 20.0]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["M"]
