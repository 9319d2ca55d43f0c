"""Figures: what each one draws (checked on the matplotlib Figure), and which sentences Fig. 3 shows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from attnrepro.data.tokenize import UNK, WordVocab
from attnrepro.evaluation.figures import token_strings
from attnrepro.evaluation.plots import (
    alignment_figure,
    bleu_by_length_figure,
    save,
    select_alignment_sentences,
    training_curves_figure,
)


def length_table() -> pd.DataFrame:
    rows = []
    for model, bleus in (("enc", [30.0, 10.0, 2.0]), ("search", [32.0, 31.0, 30.0])):
        for (lo, hi), bleu in zip([(0, 10), (10, 20), (20, 30)], bleus):
            rows.append({"model": model, "label": model, "bucket_lo": lo, "bucket_hi": hi, "bleu": bleu})
    return pd.DataFrame(rows)


def legend_texts(fig) -> list[str]:
    return [t.get_text() for t in fig.legends[0].get_texts()]


def test_fig2_draws_one_line_per_model_with_its_legend_and_style(tmp_path):
    legends = {"enc": "RNNencdec-30 (trained on ≤30 words, 100 steps)", "search": "RNNsearch-30 (trained on ≤30 words)"}
    fig = bleu_by_length_figure(length_table(), legends, "title", dashed=["enc"])
    ax = fig.axes[0]
    assert legend_texts(fig) == list(legends.values()) and fig.legends[0].get_title().get_text() == ""
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
    assert "paper: RNNsearch-50" in legend_texts(fig)
    assert len(bleu_by_length_figure(length_table(), {}, "t").axes[0].get_lines()) == 2


def ten_models(**columns) -> pd.DataFrame:
    """Ten models over five buckets, as Fig. 2 of the embedded default has them; `columns`: name -> f(bleu)."""
    rows = []
    for m in range(10):
        for lo in range(0, 50, 10):
            bleu = 90.0 - m * 8 - lo / 2
            extra = {name: f(bleu) for name, f in columns.items()}
            rows.append(
                {"model": f"m{m}", "label": f"M{m}", "bucket_lo": lo, "bucket_hi": lo + 10, "bleu": bleu} | extra
            )
    return pd.DataFrame(rows)


@pytest.mark.parametrize("dpi", [150, 72])  # the PNG's, and the PDF's 72 points per inch
@pytest.mark.parametrize(
    "legend", ["RNNsearch-{m} (trained on ≤50 words, stopped at step 12,000: plateau, best 11,500)", "Model {m}"]
)
def test_fig2_legend_sits_below_the_axes_and_their_label(dpi, legend):
    legends = {f"m{m}": legend.format(m=m) for m in range(10)}
    fig = bleu_by_length_figure(ten_models(), legends, "BLEU by source sentence length\n(cf. Bahdanau et al. 2014)")
    fig.set_dpi(dpi)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    legend = (fig.legends or [ax.get_legend()])[0].get_window_extent(renderer)
    xlabel = ax.xaxis.label.get_window_extent(renderer)
    ticks = [t.get_window_extent(renderer) for t in ax.get_xticklabels()]
    assert not legend.overlaps(xlabel) and legend.y1 < xlabel.y0
    assert not any(legend.overlaps(t) for t in ticks)
    assert not legend.overlaps(ax.get_window_extent(renderer))  # the data area
    assert legend.y0 >= 0 and legend.x0 >= 0 and legend.x1 <= fig.bbox.width  # inside the saved figure


def test_fig2_draws_intervals_as_error_bars_and_with_seeds_the_reproduction_band():
    table = ten_models(bleu_ci_lo=lambda b: b - 2, bleu_ci_hi=lambda b: b + 3).head(10)  # models m0, m1
    fig = bleu_by_length_figure(table, {}, "t")
    ax = fig.axes[0]
    (bars, _, _), _ = [c.lines for c in ax.containers]  # one ErrorbarContainer per model
    segments = ax.containers[0].lines[2][0].get_segments()
    assert [(s[0][1], s[1][1]) for s in segments] == [(88.0 - lo / 2, 93.0 - lo / 2) for lo in range(0, 50, 10)]
    x0 = [s[0][0] for s in segments]
    x1 = [s[0][0] for s in ax.containers[1].lines[2][0].get_segments()]
    assert all(b - a == pytest.approx(0.8) for a, b in zip(x0, x1))  # side by side, around the bucket's middle
    assert "95 % bootstrap interval" in fig.legends[0].get_title().get_text() and not ax.collections[2:]

    # with seeds the error bars are the reproduction band, not the (narrower) bootstrap interval of one run
    seeds = table.assign(n_runs=3, band_lo=table["bleu"] - 7, band_hi=table["bleu"] + 5).head(5)
    fig = bleu_by_length_figure(seeds, {}, "t")
    segments = fig.axes[0].containers[0].lines[2][0].get_segments()
    assert [(s[0][1], s[1][1]) for s in segments] == [(83.0 - lo / 2, 95.0 - lo / 2) for lo in range(0, 50, 10)]
    title = fig.legends[0].get_title().get_text()
    assert title == "lines: mean over 3 seeds; error bars: where the mean of another 3 seeds falls (95 %)"
    single = bleu_by_length_figure(seeds.assign(n_runs=1), {}, "t")  # one run: its bootstrap interval again
    assert "95 % bootstrap interval" in single.legends[0].get_title().get_text()


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
    assert token_strings(vocab, "a UNK c") == ["a", "UNK", "c"]  # a hypothesis's unknown word, as decode writes it


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


def test_training_curves_of_seed_runs_share_their_models_colour_and_legend_entry():
    log = pd.DataFrame({"step": [1, 2], "loss": [3.0, 2.0], "valid_loss": [2.5, 1.5]})
    runs = {"a_seed1": log, "a_seed2": log, "b_seed1": log, "b_seed2": log}
    groups = {run: run.split("_")[0] for run in runs}
    fig = training_curves_figure(runs, {"a": "A (2 seeds)", "b": "B (2 seeds)"}, "t", dashed=["b"], groups=groups)
    lines = fig.axes[0].get_lines()
    assert [line.get_color() for line in lines[:2]] == [lines[0].get_color()] * 2 != [lines[2].get_color()] * 2
    assert [line.get_linestyle() for line in lines] == ["-", "-", "--", "--"]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["A (2 seeds)", "B (2 seeds)"]


def test_the_readme_figure_puts_the_papers_comparison_left_and_one_model_per_family_right(tmp_path):
    """history_figure on the committed table and config: Bahdanau's four models left, with their bands; right, the
    longest-trained model of every arch, dashed without attention; every curve named at its end, no legend."""
    from attnrepro.archs import REGISTRY
    from attnrepro.config import load_config
    from attnrepro.evaluation.plots import history_figure
    from attnrepro.evaluation.reproduce import read_band_table

    from conftest import REPO

    table = read_band_table(REPO / "docs/figures/bleu_by_length.csv")
    models = {m.base: m for m in load_config(REPO / "config/config.yaml").models.values()}
    left, right = history_figure(table, models).axes
    curves = [[line for line in ax.get_lines() if not line.get_label().startswith("_")] for ax in (left, right)]
    paper = ["RNNencdec-30", "RNNencdec-50", "RNNsearch-30", "RNNsearch-50"]
    assert [line.get_label() for line in curves[0]] == paper and len(left.collections) == 4  # with their bands
    assert not right.collections
    drawn = {models[base].arch for base in table["base"]}  # every arch of the committed table
    assert sorted(line.get_label() for line in curves[1]) == sorted(REGISTRY[arch].name for arch in drawn)
    for line in curves[1]:
        arch = next(a for a in drawn if REGISTRY[a].name == line.get_label())
        assert (line.get_linestyle() == "--") == (not REGISTRY[arch].attention)
        longest = max((m for m in models.values() if m.arch == arch), key=lambda m: m.train.max_src_len)
        assert list(line.get_ydata()) == list(table.loc[table["base"] == longest.base, "mean"])  # mean of its seeds
    for ax, lines in zip((left, right), curves):
        labels = [t for t in ax.texts if t.get_text() in {line.get_label() for line in lines}]
        assert len(labels) == len(lines) and ax.get_legend() is None  # named at their ends, no legend
        ends = sorted(t.xyann[1] for t in labels)
        assert min(b - a for a, b in zip(ends, ends[1:])) >= 6.0 - 1e-9  # the labels never overlap
