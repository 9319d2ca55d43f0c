"""Figures mirroring the papers: BLEU by sentence length (Bahdanau et al. 2014, Fig. 2),
alignment heatmaps (Bahdanau et al. 2014, Fig. 3) and training curves.

Every model keeps one colour in every figure (its position in the config); models without
attention are drawn dashed. Figures are built by functions returning a matplotlib Figure
(tested on the Figure itself) and written by `save`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from attnrepro.archs import REGISTRY  # noqa: E402
from attnrepro.config import ModelConfig  # noqa: E402
from attnrepro.errors import DataError  # noqa: E402

LEGEND_COLUMN_CHARS = 60  # longer legend entries go in one column: two would be wider than the figure


def model_colors(models: Sequence[str]) -> dict[str, str]:
    """One colour per model, in config order (tab10, then tab20 for more than ten models)."""
    cmap = plt.get_cmap("tab10" if len(models) <= 10 else "tab20")
    return {m: matplotlib.colors.to_hex(cmap(i % cmap.N)) for i, m in enumerate(models)}


def save(
    fig: Figure, out_stem: Path, suffixes: Sequence[str] = (".png", ".pdf"), metadata: dict[str, str] | None = None
) -> list[Path]:
    """out_stem + each suffix; `metadata`: text the files keep (PNG text chunks)."""
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [out_stem.with_name(out_stem.name + s) for s in suffixes]
    for path in paths:
        fig.savefig(path, dpi=150, bbox_inches="tight", metadata=metadata)  # keeps legends placed outside the axes
    plt.close(fig)
    return paths


def bleu_by_length_figure(
    table: pd.DataFrame,
    legends: dict[str, str],
    title: str,
    dashed: Sequence[str] = (),
    paper_points: dict[str, Sequence[Sequence[float]]] | None = None,
    metric: str = "sacreBLEU",
) -> Figure:
    """Bahdanau et al. 2014, Fig. 2: BLEU against source sentence length, one line per model (`metric` names
    the score, for the axis).

    table: rows model, bucket_lo, bucket_hi, bleu, and where known bleu_ci_lo/bleu_ci_hi (95 % bootstrap
    interval: error bars) and n_runs, band_lo/band_hi (a model trained once per seed: bleu is the mean over its
    runs, and the error bars are its reproduction band instead); legends: model -> legend text (label and
    training length);
    dashed: models drawn dashed; paper_points: legend text -> [[length, BLEU], ...] from paper_numbers.yaml,
    drawn as open markers. The legend sits below the axes and their label, never over them.
    """
    models = list(dict.fromkeys(table["model"]))
    entries = [legends.get(m, m) for m in models] + list(paper_points or {})
    ncol = 2 if len(entries) > 3 and max(map(len, entries)) <= LEGEND_COLUMN_CHARS else 1
    legend_rows = -(-len(entries) // ncol)
    fig, ax = plt.subplots(figsize=(8.0, 4.6 + 0.22 * legend_rows), layout="constrained")
    colors = model_colors(models)
    spread = _known(table, "band_lo", "band_hi", "n_runs") and bool((table["n_runs"] > 1).any())
    lo, hi = ("band_lo", "band_hi") if spread else ("bleu_ci_lo", "bleu_ci_hi")  # seeds: the band, else bootstrap
    intervals = _known(table, lo, hi)
    width = float((table["bucket_hi"] - table["bucket_lo"]).min())
    step = min(0.8, 0.5 * width / len(models)) if intervals else 0.0  # side by side, so error bars do not overlap
    for i, model in enumerate(models):
        rows = table[table["model"] == model]
        centres = (rows["bucket_lo"] + rows["bucket_hi"]) / 2 + 0.5 + (i - (len(models) - 1) / 2) * step
        style = {"color": colors[model], "linestyle": "--" if model in dashed else "-"}
        ax.plot(centres, rows["bleu"], marker="o", label=legends.get(model, model), gid=model, **style)
        if intervals and rows[lo].notna().any():
            below, above = rows["bleu"] - rows[lo], rows[hi] - rows["bleu"]
            ax.errorbar(centres, rows["bleu"], yerr=[below, above], fmt="none", ecolor=colors[model], capsize=2, lw=0.9)
    for i, (label, points) in enumerate((paper_points or {}).items()):
        xs, ys = zip(*points)
        ax.plot(xs, ys, linestyle=":", marker="s", mfc="none", color=f"C{(len(models) + i) % 10}", label=label)
    edges = sorted(set(table["bucket_lo"]) | set(table["bucket_hi"]))
    ax.set_xticks(edges)
    ax.set_xlim(edges[0], edges[-1])
    ax.set_xlabel("Sentence length (source words)", fontsize=11)
    ax.set_ylabel(f"BLEU score ({metric}, per length bucket)", fontsize=11)
    ax.set_title(title, fontsize=11)
    highest = [table[c] for c in ("bleu", hi) if c in table]
    ax.set_ylim(0, max(5.0, float(np.nanmax(pd.concat(highest))) * 1.08))
    ax.grid(alpha=0.3)
    key = _uncertainty_key(table, intervals, spread)
    fig.legend(loc="outside lower center", ncol=ncol, fontsize=9, title=key, title_fontsize=9)
    return fig


PAPER_COMPARISON = ("rnnenc", "rnnsearch")  # the archs of Bahdanau et al. 2014's Fig. 2: RNNencdec, RNNsearch
LABEL_GAP = 6.0  # BLEU between two labels at the curves' ends (about a 9-point line at the figure's height)


def history_figure(table: pd.DataFrame, models: Mapping[str, ModelConfig]) -> Figure:
    """The README's figure: BLEU by source length in two panels a reader takes in at once. Left, the paper's
    own comparison (every model of an arch in PAPER_COMPARISON, its -30 dashed); right, one model per arch (the
    one trained on the longest sentences), without attention dashed. Each curve is named at its end, no
    legend; the left panel shades each model's reproduction band.

    table: a band table (`reproduce.band_table`: base, bucket_lo, bucket_hi, mean, band_lo, band_hi); models:
    configured model (the table's base) -> its config."""
    known = [base for base in dict.fromkeys(table["base"]) if base in models]
    if not known:
        raise DataError("the band table has no model of the config: nothing to draw")
    paper = [b for b in known if models[b].arch in PAPER_COMPARISON]
    longest: dict[str, str] = {}
    for base in known:
        arch = models[base].arch
        if arch not in longest or models[base].train.max_src_len > models[longest[arch]].train.max_src_len:
            longest[arch] = base
    colors = {arch: f"C{i % 10}" for i, arch in enumerate(REGISTRY)}
    fig, (left, right) = plt.subplots(1, 2, figsize=(11.0, 4.4), sharey=True, layout="constrained")
    for base in paper:
        style = "--" if models[base].train.max_src_len < max(models[b].train.max_src_len for b in paper) else "-"
        _history_curve(left, table[table["base"] == base], models[base].label, colors[models[base].arch], style, True)
    for arch, base in longest.items():
        style = "-" if REGISTRY[arch].attention else "--"
        _history_curve(right, table[table["base"] == base], REGISTRY[arch].name, colors[arch], style, False)
    lengths = sorted({models[b].train.max_src_len for b in known})
    left.set_title("Bahdanau et al. 2014, Fig. 2: a fixed vector against attention", fontsize=10)
    right.set_title(f"one model per family, trained on ≤ {lengths[-1]} words (dashed: no attention)", fontsize=10)
    left.set_ylabel("BLEU (sacreBLEU, per 10-word bucket)", fontsize=10)
    for ax, shown in ((left, paper), (right, list(longest.values()))):
        for length in sorted({models[b].train.max_src_len for b in shown}):
            ax.axvline(length, color="0.6", lw=0.8, ls=":")
            ax.annotate(f"trained ≤ {length}", (length, 1.0), xycoords=("data", "axes fraction"), xytext=(-2, -2),
                        textcoords="offset points", ha="right", va="top", fontsize=7.5, color="0.4")  # fmt: skip
        ax.set_xlim(float(table["bucket_lo"].min()), float(table["bucket_hi"].max()))
        ax.set_ylim(0, 105)
        _label_curve_ends(ax)
        ax.set_xlabel("source sentence length (words)", fontsize=10)
        ax.grid(alpha=0.3)
    return fig


def _history_curve(ax, rows: pd.DataFrame, name: str, color: str, style: str, band: bool) -> None:
    centres = (rows["bucket_lo"] + rows["bucket_hi"]) / 2
    ax.plot(centres, rows["mean"], color=color, linestyle=style, marker="o", ms=3.5, lw=1.8, label=name)
    if band:
        ax.fill_between(centres, rows["band_lo"], rows["band_hi"], color=color, alpha=0.15, lw=0)


def _label_curve_ends(ax) -> None:
    """Each line's label just right of its last point, moved apart where they would overlap."""
    ends = sorted(
        ((line.get_ydata()[-1], line.get_xdata()[-1], line) for line in ax.get_lines() if line.get_label()[0] != "_"),
        key=lambda end: -end[0],
    )
    placed: list[float] = []
    for y, _, _ in ends:  # top down: each label at its line's end, or a gap below the one above
        placed.append(min(y, placed[-1] - LABEL_GAP) if placed else min(y, 103.0))
    for i in reversed(range(len(placed))):  # bottom up: none below the axes, each a gap above the one below
        placed[i] = max(placed[i], placed[i + 1] + LABEL_GAP if i + 1 < len(placed) else 1.5)
    for (y, x, line), at in zip(ends, placed):
        ax.annotate(line.get_label(), (x, y), xytext=(ax.get_xlim()[1] + 1.0, at), textcoords="data",
                    color=line.get_color(), fontsize=8.5, va="center", annotation_clip=False,
                    arrowprops={"arrowstyle": "-", "color": line.get_color(), "lw": 0.6, "alpha": 0.6})  # fmt: skip


def _known(table: pd.DataFrame, *columns: str) -> bool:
    return all(c in table and table[c].notna().any() for c in columns)


def _uncertainty_key(table: pd.DataFrame, intervals: bool, spread: bool) -> str | None:
    """The legend's title: what the lines and error bars show."""
    if not spread:
        return "error bars: 95 % bootstrap interval of the bucket's BLEU" if intervals else None
    counts = sorted(set(table.loc[table["n_runs"] > 1, "n_runs"]))
    seeds = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"
    return f"lines: mean over {seeds} seeds; error bars: where the mean of another {seeds} seeds falls (95 %)"


def select_alignment_sentences(sources: Sequence[str], n: int, max_words: int = 40) -> list[int]:
    """Indices of `n` test sentences of spread-out lengths (Bahdanau Fig. 3 shows several lengths).

    Target lengths are evenly spaced from the shortest sentence of >= 3 words up to
    min(longest, max_words) (longer ones make unreadable tick labels); for each, the first
    sentence of the closest length not already taken. Depends only on the test source text,
    so every model shows the same sentences.
    """
    if n <= 0:
        return []
    lengths = np.array([len(s.split()) for s in sources])
    usable = np.flatnonzero(lengths >= min(3, lengths.max(initial=0)))
    if len(usable) == 0:
        return []
    lo, hi = lengths[usable].min(), min(lengths[usable].max(), max(max_words, lengths[usable].min()))
    chosen: list[int] = []
    for target in np.linspace(lo, hi, n):
        free = [i for i in usable if i not in chosen]
        if not free:
            break
        chosen.append(int(min(free, key=lambda i: (abs(lengths[i] - target), i))))
    return chosen


def alignment_figure(weights: np.ndarray, src_tokens: Sequence[str], tgt_tokens: Sequence[str], title: str) -> Figure:
    """Bahdanau et al. 2014, Fig. 3: weights α_ij, rows target tokens i, columns source tokens j,
    in grayscale (white = 1, black = 0) as in the paper."""
    n_tgt, n_src = weights.shape
    if (n_tgt, n_src) != (len(tgt_tokens), len(src_tokens)):
        raise DataError(f"attention is {n_tgt}x{n_src} but there are {len(tgt_tokens)}x{len(src_tokens)} tokens")
    width = min(3.0 + 0.28 * max(n_src, 1), 16.0)
    height = min(2.5 + 0.28 * max(n_tgt, 1), 16.0)
    fig, ax = plt.subplots(figsize=(width, height))
    if n_tgt == 0 or n_src == 0:
        ax.text(0.5, 0.5, "empty translation: nothing to align", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
    else:
        image = ax.imshow(weights, cmap="gray", vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
        ax.set_xticks(range(n_src), labels=list(src_tokens), rotation=90, fontsize=8)
        ax.set_yticks(range(n_tgt), labels=list(tgt_tokens), fontsize=8)
        ax.xaxis.tick_top()
        fig.colorbar(image, ax=ax, fraction=0.03, pad=0.02, label="attention weight α")
    ax.set_xlabel("source tokens", fontsize=10)
    ax.xaxis.set_label_position("top")
    ax.set_ylabel("target tokens (our translation)", fontsize=10)
    ax.set_title(title, fontsize=10, pad=12)
    fig.tight_layout()
    return fig


def training_curves_figure(
    logs: dict[str, pd.DataFrame],
    labels: dict[str, str],
    title: str,
    dashed: Sequence[str] = (),
    groups: dict[str, str] | None = None,
) -> Figure:
    """Training loss, validation loss and (when any model logged it) validation BLEU against step.

    logs: run -> its train_log.csv; groups: run -> the model it is a run of (one per seed), whose colour and
    legend entry (labels: model -> text) its runs share; without groups every run is its own model."""
    panels = [("loss", "training loss (per target token)"), ("valid_loss", "validation loss (per target token)")]
    if any("valid_bleu" in log and log["valid_bleu"].notna().any() for log in logs.values()):
        panels.append(("valid_bleu", "validation BLEU"))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.8 * len(panels), 4.2), squeeze=False)
    groups = groups or {run: run for run in logs}
    colors = model_colors(list(dict.fromkeys(groups.values())))
    first_runs = {groups[run]: run for run in reversed(list(logs))}
    for ax, (column, ylabel) in zip(axes[0], panels):
        for run, log in logs.items():
            if column not in log:
                continue
            rows = log[log[column].notna()]
            model = groups[run]
            ax.plot(
                rows["step"],
                rows[column],
                marker="." if column != "loss" else None,
                color=colors[model],
                linestyle="--" if run in dashed or model in dashed else "-",
                label=labels.get(model, model) if first_runs[model] == run else "_nolegend_",
            )
        ax.set_xlabel("training step", fontsize=10)
        ax.set_ylabel(ylabel, fontsize=10)
        ax.grid(alpha=0.3)
    handles, names = axes[0][0].get_legend_handles_labels()
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.legend(handles, names, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(len(names), 2), fontsize=9)
    return fig
