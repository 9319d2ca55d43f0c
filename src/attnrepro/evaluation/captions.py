"""The "what we see" half of the report's captions, written from the finished runs' numbers.

Each function returns a reStructuredText fragment; the static captions in workflow/report/*.rst
say what the paper showed and `.. include::` the fragment, so every caption in the Snakemake
report states our numbers without anyone editing it by hand.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from attnrepro.evaluation.render import spread_text


def _fmt(value: object, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "n/a"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def table_caption(note: str, findings: Sequence[str]) -> str:
    """One bullet per finding, then the table's note (the table itself is the report's HTML view)."""
    return f"{bullets(findings)}\n{note}\n"


def table1_findings(table: pd.DataFrame) -> list[str]:
    """Ours against the paper: each model's tokenized BLEU beside the paper's, and the ranking."""
    ours = table[table["model"].notna()]
    lines = []
    for _, row in ours.iterrows():
        paper = f"; paper {_fmt(row['all_paper'])}" if pd.notna(row["all_paper"]) else ""
        no_unk = (
            f", No UNK {spread_text(row, 'no_unk_tokenized')} on {int(row['no_unk_sentences'])} sentences"
            if pd.notna(row["no_unk_sentences"])
            else ", No UNK does not apply (subword vocabulary)"
        )
        paper_no_unk = f" (paper {_fmt(row['no_unk_paper'])})" if pd.notna(row["no_unk_paper"]) else ""
        interval = f"; sacreBLEU {spread_text(row, 'all_sacrebleu')}" if pd.notna(row["all_sacrebleu_ci_lo"]) else ""
        score = spread_text(row, "all_tokenized")
        lines.append(f"{row['label']}: {score} tokenized BLEU{paper}{no_unk}{paper_no_unk}{interval}{_lc_tok(row)}.")
    both = ours[ours["all_paper"].notna()]
    if len(both) >= 2:
        rank_ours = " > ".join(both.sort_values("all_tokenized", ascending=False)["label"])
        rank_paper = " > ".join(both.sort_values("all_paper", ascending=False)["label"])
        same = "the same order" if rank_ours == rank_paper else "a different order"
        lines.append(f"Ranking, ours: {rank_ours}; paper: {rank_paper} ({same}).")
    return lines


def _lc_tok(row: pd.Series) -> str:
    """ "; lowercased tokenized BLEU 42.10 [41.20, 43.00] (published 41.02, Wu et al. 2021)" on Multi30k; else ""."""
    if pd.isna(row.get("all_lc_tok")):
        return ""
    published = f" (published {row['published']}, {row['published_short']})" if pd.notna(row.get("published")) else ""
    return f"; lowercased tokenized BLEU {spread_text(row, 'all_lc_tok')}{published}"


def table2_findings(table: pd.DataFrame) -> list[str]:
    lines = []
    for _, row in table.iterrows():
        flops = row["train_flops_estimate"]
        cost = f", ≈{flops:.2g} training FLOPs (estimate)" if pd.notna(flops) else ", tokens seen not logged"
        lines.append(
            f"{row['label']}: {spread_text(row, 'bleu_tokenized')} tokenized BLEU, {int(row['parameters']):,} "
            f"parameters, {_steps(row)}{cost}."
        )
    papers = table[table["paper_train_flops"].notna()]
    for _, row in papers.iterrows():
        lines.append(
            f"Paper, {row['label']}: EN-DE {_fmt(row['paper_en_de'], 1)}, EN-FR {_fmt(row['paper_en_fr'], 1)}, "
            f"{row['paper_train_flops']:.2g} FLOPs."
        )
    return lines


def _steps(row: pd.Series) -> str:
    """Steps trained, "2,000 steps"; where early stopping recorded it, "stopped at step 6,000 (plateau),
    weights of step 4,500" (with seeds: means and min–max over the runs)."""
    steps = spread_text(row, "steps", "{:,.0f}")
    if pd.isna(row.get("stop_reason")):
        return f"{steps} steps"
    return f"stopped at step {steps} ({row['stop_reason']}), weights of step {spread_text(row, 'best_step', '{:,.0f}')}"


def bleu_by_length_findings(table: pd.DataFrame, legends: dict[str, str]) -> list[str]:
    """Per model: BLEU on the shortest and longest bucket (with seeds: mean (min–max); with intervals:
    [95 % bootstrap interval]), and where it first falls below half its best."""
    lines = []
    for model, rows in table.groupby("model", sort=False):
        rows = rows.sort_values("bucket_lo")
        first, last = rows.iloc[0], rows.iloc[-1]
        best = rows["bleu"].max()
        below = rows[rows["bleu"] < best / 2]
        fall = (
            f"first below half its best ({best:.1f}) at {int(below.iloc[0]['bucket_lo']) + 1}–"
            f"{int(below.iloc[0]['bucket_hi'])} words"
            if len(below) and best > 0
            else f"never below half its best ({best:.1f})"
        )
        lines.append(
            f"{legends.get(model, model)}: {spread_text(first, fmt='{:.1f}')} BLEU on {int(first['bucket_lo']) + 1}–"
            f"{int(first['bucket_hi'])} words, {spread_text(last, fmt='{:.1f}')} on {int(last['bucket_lo']) + 1}–"
            f"{int(last['bucket_hi'])} words; {fall}."
        )
    return lines


def training_findings(logs: dict[str, pd.DataFrame], labels: dict[str, str]) -> list[str]:
    lines = []
    for model, log in logs.items():
        last = log.iloc[-1]
        valid = log[log["valid_loss"].notna()]
        parts = [f"{labels.get(model, model)}: training loss {last['loss']:.3f} at step {int(last['step']):,}"]
        if len(valid):
            best = valid.loc[valid["valid_loss"].idxmin()]
            parts.append(f"best validation loss {best['valid_loss']:.3f} (step {int(best['step']):,})")
        if "valid_bleu" in log and log["valid_bleu"].notna().any():
            best = log.loc[log["valid_bleu"].idxmax()]
            parts.append(f"best validation BLEU {best['valid_bleu']:.1f} (step {int(best['step']):,})")
        lines.append(", ".join(parts) + ".")
    return lines


def alignment_findings(label: str, sentences: Sequence[tuple[int, int, np.ndarray]]) -> list[str]:
    """sentences: (test line index, source words, weights). Sharpness = mean over target tokens of the
    largest weight (1: each target token attends to one source token; 1/n: uniform over n tokens)."""
    lines = []
    for index, words, weights in sentences:
        if weights.size == 0:
            lines.append(f"{label}, test sentence {index + 1} ({words} words): empty translation.")
            continue
        sharp = float(weights.max(axis=1).mean())
        uniform = 1.0 / weights.shape[1]
        lines.append(
            f"{label}, test sentence {index + 1} ({words} source words, {weights.shape[0]} target x "
            f"{weights.shape[1]} source tokens): mean largest weight per target token {sharp:.2f} "
            f"(uniform attention would give {uniform:.2f})."
        )
    return lines


def bullets(findings: Sequence[str], heading: str = "**What we see.**") -> str:
    return heading + "\n\n" + "".join(f"- {line}\n" for line in findings)
