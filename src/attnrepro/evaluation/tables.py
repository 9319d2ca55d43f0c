"""Tables gathered from finished runs, the papers' numbers beside ours.

- Bahdanau et al. 2014, Table 1: BLEU on all test sentences and on those without an unknown
  word ("No UNK"), one row per configured model, the paper's value beside ours; on Multi30k also our
  lowercased tokenized BLEU (bleu_lc_tok) and the published system of the model's kind, scored
  the same way (paper_numbers.yaml's multi30k_published).
- Vaswani et al. 2017, Table 2: BLEU and training FLOPs, one row per configured model; ours are
  estimated as 6 x parameters x tokens seen (see `training_flops`), the paper's from GPU time.
- BLEU by source length (Bahdanau Fig. 2's numbers).

A model trained once per seed (`seeds: [...]`) has one row: the mean over its runs with their min–max;
tables/bleu_by_length.csv keeps one row per run.

Every table says what it sets side by side: each model's parameter count, its seeds and the commit its runs
were trained at (shown where the rows differ, always in the CSV), and `(DIVERGED)` after the label of a model
one of whose runs diverged, in every table and legend. No number that is not finite reaches a table unmarked.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from attnrepro.config import Config, ModelConfig
from attnrepro.errors import DataError
from attnrepro.evaluation import captions as cap
from attnrepro.evaluation.aggregate import aggregate_runs, bleu_by_length_aggregate
from attnrepro.evaluation.papers import (
    multi30k_pair,
    paper_numbers,
    paper_row,
    paper_value,
    published_multi30k,
    short_source,
)
from attnrepro.evaluation.render import View, spread_text, write_table
from attnrepro.evaluation.reproduce import band_table
from attnrepro.evaluation.runs import (
    RunCheckpoint,
    TrainingLogs,
    read_bleu,
    read_bleu_by_length,
    read_checkpoints,
)
from attnrepro.evaluation.scoring import LENGTH_BLEU

FLOPS_NOTE = (
    "Our training FLOPs are an estimate: 6 x parameters x tokens seen (source + target tokens of every "
    "training batch, from train_log.csv), the usual 2 (forward) + 4 (backward) multiply-adds per parameter "
    "and token. It overcounts an encoder-decoder, whose encoder weights see only source tokens and decoder "
    "weights only target tokens, and ignores attention's length-dependent cost. The paper's FLOPs are "
    "training time x GPUs x each GPU's sustained throughput (Vaswani et al. 2017, section 6.1)."
)
TABLE1_CI = ["all_sacrebleu_ci_lo", "all_sacrebleu_ci_hi"]  # bleu.json's "bleu_ci": the sacreBLEU score's
TABLE1_LC_TOK_CI = ["all_lc_tok_ci_lo", "all_lc_tok_ci_hi"]  # bleu.json's "bleu_lc_tok_ci"
SEEDS_NOTE = "A model trained once per seed: the mean over its runs, (min–max) over them."
CI_NOTE = "[lo, hi]: the 95 % bootstrap interval of the test-set score (with seeds, the mean of the runs' bounds)."


def provenance(cfg: Config, name: str, checkpoints: dict[str, RunCheckpoint] | None) -> dict[str, Any]:
    """A run's parameter count, seed and commit as table columns (empty without its checkpoint)."""
    ckpt = (checkpoints or {}).get(name)
    return {
        "parameters": ckpt.parameter_count() if ckpt else None,
        "seeds": str(cfg.model(name).train.seed),
        "commit": (ckpt.commit or "not recorded") if ckpt else None,
    }


PROVENANCE_JOINED = ["seeds", "commit"]  # a model's runs: their seeds and commits, comma-separated


def table1(
    cfg: Config,
    scores: dict[str, dict[str, Any]],
    papers: dict[str, Any] | None = None,
    checkpoints: dict[str, RunCheckpoint] | None = None,
) -> pd.DataFrame:
    """Bahdanau Table 1 for every configured model (paper row beside ours), then the paper's rows no model has;
    with the runs' checkpoints, each model's parameter count, seeds and commits."""
    papers = paper_numbers() if papers is None else papers
    runs = pd.DataFrame(
        [_table1_run(cfg, model, scores[name], papers) | provenance(cfg, name, checkpoints)
         for name, model in cfg.models.items()]
    )  # fmt: skip
    spread = ["all_tokenized", "no_unk_tokenized", "all_sacrebleu", "all_lc_tok"]
    mean = ["no_unk_sacrebleu", *TABLE1_CI, *TABLE1_LC_TOK_CI, "parameters"]
    rows = aggregate_runs(runs, ["base"], spread, mean, PROVENANCE_JOINED)
    used = set(rows["paper_row"].dropna())
    source = papers["bahdanau2014_table1"]["source"]
    paper_only = [
        {
            "model": None,
            "label": f"{name} (paper only)",
            "all_paper": values.get("all"),
            "no_unk_paper": values.get("no_unk"),
            "paper_row": f"{source}: {name}",
            "paper_short": f"{short_source(source)}: {name}",
        }
        for name, values in papers["bahdanau2014_table1"]["rows"].items()
        if f"{source}: {name}" not in used
    ]
    return pd.concat([rows, pd.DataFrame(paper_only)], ignore_index=True).reindex(columns=TABLE1_COLUMNS)


def _table1_run(cfg: Config, model: ModelConfig, s: dict[str, Any], papers: dict[str, Any]) -> dict[str, Any]:
    paper = paper_row(model, "bahdanau2014_table1", "sutskever2014_table1", papers=papers)
    published = published_multi30k(cfg, model, papers)
    no_unk = s["no_unk"] if s["no_unk"]["applies"] else {}
    lo, hi = s.get("bleu_ci") or (None, None)
    lc_lo, lc_hi = s.get("bleu_lc_tok_ci") or (None, None)
    return {
        "model": model.name,
        "base": model.base,
        "label": model.label,
        "arch": model.arch,
        "train_max_len": model.train.max_src_len,
        "all_tokenized": s["bleu_tokenized"],
        "all_paper": paper_value(paper, "all"),
        "no_unk_tokenized": no_unk.get("bleu_tokenized"),
        "no_unk_paper": paper_value(paper, "no_unk"),
        "no_unk_sentences": no_unk.get("n_sentences"),
        "n_sentences": s["n_sentences"],
        "all_sacrebleu": s["bleu"],
        "all_sacrebleu_ci_lo": lo,
        "all_sacrebleu_ci_hi": hi,
        "no_unk_sacrebleu": no_unk.get("bleu"),
        "all_lc_tok": s.get("bleu_lc_tok"),
        "all_lc_tok_ci_lo": lc_lo,
        "all_lc_tok_ci_hi": lc_hi,
        "published": published.text if published else None,
        "published_source": published.source if published else None,
        "published_short": published.short if published else None,
        "paper_row": f"{papers[paper.table]['source']}: {paper.name}" if paper else None,
        "paper_short": f"{short_source(papers[paper.table]['source'])}: {paper.name}" if paper else None,
    }


TABLE1_COLUMNS = [
    "model", "label", "arch", "parameters", "n_runs", "seeds", "commit", "train_max_len", "all_tokenized",
    "all_tokenized_min", "all_tokenized_max",
    "all_paper", "no_unk_tokenized", "no_unk_tokenized_min", "no_unk_tokenized_max", "no_unk_paper",
    "no_unk_sentences", "n_sentences", "all_sacrebleu", "all_sacrebleu_min", "all_sacrebleu_max",
    "all_sacrebleu_ci_lo", "all_sacrebleu_ci_hi", "no_unk_sacrebleu", "all_lc_tok", "all_lc_tok_min",
    "all_lc_tok_max", "all_lc_tok_ci_lo", "all_lc_tok_ci_hi", "published", "published_source", "published_short",
    "paper_row", "paper_short",
]  # fmt: skip


def has_seeds(table: pd.DataFrame) -> bool:
    return bool((table["n_runs"] > 1).any())


def provenance_view(table: pd.DataFrame) -> View:
    """The parameter count of every model, and its seeds and commit where the rows differ in them: rows set
    side by side say what they are."""
    view: View = {}
    if "parameters" in table and table["parameters"].notna().any():
        view["parameters"] = ("parameters", "{:,.0f}")
    for column, header in (("seeds", "seeds"), ("commit", "trained at commit")):
        if column in table and table[column].dropna().nunique() > 1:
            view[column] = (header, "{}")
    return view


def provenance_note(table: pd.DataFrame) -> str:
    """A sentence saying in what the rows differ (seeds, commit), or that they share them."""
    parts = []
    for column, what in (("seeds", "seeds"), ("commit", "commit")):
        values = table[column].dropna().unique() if column in table else []
        if len(values) > 1:
            parts.append(f"the rows differ in {what} (a column says which)")
        elif len(values) == 1:
            parts.append(f"every row's {what}: {values[0]}")
    return f"Runs: {'; '.join(parts)}." if parts else ""


def _score(column: str, header: str, seeds: bool, fmt: str = "{:.2f}") -> View:
    """A view column of a score; with seeds its mean (min–max)."""
    if not seeds:
        return {column: (header, fmt)}
    return {(column, f"{column}_min", f"{column}_max"): (f"{header}, mean (min–max)", f"{fmt} ({fmt}–{fmt})")}


def table1_view(table: pd.DataFrame) -> View:
    """The Markdown/HTML columns of Table 1 (the CSV keeps every column under its key)."""
    seeds = has_seeds(table)
    view: View = {"label": ("model", "{}")} | provenance_view(table)
    view |= {"train_max_len": ("trained on ≤ words", "{:.0f}")}
    view |= _score("all_tokenized", "All, ours (tok. BLEU)", seeds) | {"all_paper": ("All, paper", "{:.2f}")}
    view |= _score("no_unk_tokenized", "No UNK, ours (tok. BLEU)", seeds)
    view |= {"no_unk_paper": ("No UNK, paper", "{:.2f}"), "no_unk_sentences": ("No UNK sentences", "{:.0f}")}
    view |= _score("all_sacrebleu", "All, ours (sacreBLEU)", seeds)
    if table["all_sacrebleu_ci_lo"].notna().any():
        view[tuple(TABLE1_CI)] = ("sacreBLEU 95 % CI", "[{:.2f}, {:.2f}]")
    if table["all_lc_tok"].notna().any():  # the Multi30k literature's scoring, and the published systems beside it
        view |= _score("all_lc_tok", "All, ours (lc. tok. BLEU)", seeds)
        if table["all_lc_tok_ci_lo"].notna().any():
            view[tuple(TABLE1_LC_TOK_CI)] = ("lc. tok. 95 % CI", "[{:.2f}, {:.2f}]")
    if table["published"].notna().any():
        view |= {"published": ("published (lc. tok.)", "{}"), "published_short": ("published by", "{}")}
    return view | {"paper_short": ("paper row", "{}")}


def training_flops(parameters: int, src_tokens: float, tgt_tokens: float) -> float:
    """6 N D (Kaplan et al. 2020's C ≈ 6ND) with D = source + target tokens seen: see FLOPS_NOTE."""
    return 6.0 * parameters * (src_tokens + tgt_tokens)


def table2(
    cfg: Config,
    scores: dict[str, dict[str, Any]],
    logs: dict[str, pd.DataFrame],
    checkpoints: dict[str, RunCheckpoint],
    parameters: dict[str, int],
    papers: dict[str, Any] | None = None,
) -> pd.DataFrame:
    """Vaswani Table 2 for every configured model: BLEU, parameters, steps trained and the step kept (why it
    stopped), tokens seen, estimated training FLOPs."""
    papers = paper_numbers() if papers is None else papers
    rows = []
    for name, model in cfg.models.items():
        last, ckpt = logs[name].iloc[-1], checkpoints[name]
        src_tokens, tgt_tokens = last["src_tokens"], last["tgt_tokens"]
        known = not (pd.isna(src_tokens) or pd.isna(tgt_tokens))
        paper = paper_row(model, "vaswani2017_table2", papers=papers)
        rows.append(
            {
                "model": name,
                "base": model.base,
                "label": model.label,
                "arch": model.arch,
                "bleu_tokenized": scores[name]["bleu_tokenized"],
                "bleu_sacrebleu": scores[name]["bleu"],
                "paper_en_de": paper_value(paper, "en_de"),
                "paper_en_fr": paper_value(paper, "en_fr"),
                "parameters": parameters[name],
                "steps": ckpt.last_step,
                "best_step": ckpt.step,
                "stop_reason": ckpt.stop_reason,
                "tokens_seen": int(src_tokens + tgt_tokens) if known else None,
                "train_flops_estimate": training_flops(parameters[name], src_tokens, tgt_tokens) if known else None,
                "paper_train_flops": paper_value(paper, "flops"),
            }
            | {k: v for k, v in provenance(cfg, name, checkpoints).items() if k != "parameters"}
        )
    spread = ["bleu_tokenized", "bleu_sacrebleu", "steps", "best_step"]
    table = aggregate_runs(
        pd.DataFrame(rows),
        ["base"],
        spread,
        ["tokens_seen", "train_flops_estimate"],
        ["stop_reason", *PROVENANCE_JOINED],
    )
    return table.reindex(columns=TABLE2_COLUMNS)


TABLE2_COLUMNS = [
    "model", "label", "arch", "n_runs", "bleu_tokenized", "bleu_tokenized_min", "bleu_tokenized_max",
    "bleu_sacrebleu", "bleu_sacrebleu_min", "bleu_sacrebleu_max", "paper_en_de", "paper_en_fr", "parameters",
    "seeds", "commit", "steps", "steps_min", "steps_max", "best_step", "best_step_min", "best_step_max", "stop_reason",
    "tokens_seen", "train_flops_estimate", "paper_train_flops",
]  # fmt: skip


def table2_view(table: pd.DataFrame) -> View:
    """The Markdown/HTML columns of Table 2; the step kept and why training stopped once a run records them."""
    seeds = has_seeds(table)
    view: View = {"label": ("model", "{}")}
    view |= _score("bleu_tokenized", "BLEU, ours (tok.)", seeds)
    view |= _score("bleu_sacrebleu", "BLEU, ours (sacreBLEU)", seeds)
    view |= {"paper_en_de": ("EN-DE, paper", "{:.1f}"), "paper_en_fr": ("EN-FR, paper", "{:.1f}")}
    view |= provenance_view(table) | _score("steps", "steps", seeds, "{:,.0f}")
    if table["stop_reason"].notna().any():
        view |= _score("best_step", "weights of step", seeds, "{:,.0f}") | {"stop_reason": ("stopped", "{}")}
    view |= {"tokens_seen": ("tokens seen (src+tgt)", "{:,.0f}")}
    view |= {"train_flops_estimate": ("training FLOPs, ours (estimate)", "{:.2e}")}
    return view | {"paper_train_flops": ("training FLOPs, paper", "{:.1e}")}


def bucket_cell(row: pd.Series) -> str:
    """A bucket's BLEU as text: with seeds, the mean and the reproduction band "93.12 [88.40, 97.84]"; one run,
    its score and 95 % bootstrap interval (render.spread_text)."""
    if row.get("n_runs", 1) > 1 and pd.notna(row.get("band_lo")):
        return f"{row['bleu']:.2f} [{row['band_lo']:.2f}, {row['band_hi']:.2f}]"
    return spread_text(row)


def bleu_by_length_wide(table: pd.DataFrame) -> pd.DataFrame:
    """Buckets as rows ("1–10", ...), one column per model under its label: the bucket's BLEU as text
    (`bucket_cell`)."""
    cells = table.assign(cell=[bucket_cell(row) for _, row in table.iterrows()])
    wide = cells.pivot_table(
        index=["bucket_lo", "bucket_hi"], columns="model", values="cell", aggfunc="first", sort=False
    )
    models = list(dict.fromkeys(table["model"]))
    labels = dict(zip(table["model"], table["label"]))
    shared = {label for label in labels.values() if list(labels.values()).count(label) > 1}
    wide = wide[models].rename(columns={m: f"{labels[m]} ({m})" if labels[m] in shared else labels[m] for m in models})
    wide.index = [f"{lo + 1}–{hi}" for lo, hi in wide.index]
    wide.index.name = "source words"
    if "parameters" in table and table["parameters"].notna().all():  # what each column's model is
        counts = table.drop_duplicates("model").set_index("model")["parameters"]
        wide.loc["parameters"] = [f"{int(counts[m]):,}" for m in models]
    return wide.reset_index().rename_axis(columns=None)


def table_notes(cfg: Config, table: str, papers: dict[str, Any] | None = None) -> str:
    """What the paper column is and whether it is the same test set as ours."""
    papers = paper_numbers() if papers is None else papers
    if table == "table1":
        spec = papers["bahdanau2014_table1"]
        same = cfg.dataset == spec["dataset"]
        note = (
            f"Paper: {spec['source']} ({spec['test_set']}); a seq2seq row is Sutskever et al. 2014's Table 1. "
            "Ours: tokenized BLEU (Moses-tokenized, as multi-bleu.perl) beside the paper; sacreBLEU in the "
            "last columns. No UNK: test sentences whose source and reference have no word outside the model's "
            "vocabularies; blank for subword (sentencepiece) vocabularies, where it does not apply."
        )
    else:
        spec = papers["vaswani2017_table2"]
        same = cfg.dataset in spec["datasets"].values()
        note = f"Paper: {spec['source']} ({spec['test_set']}). {FLOPS_NOTE}"
    if not same:
        note += (
            f" Our dataset is `{cfg.dataset}`, not the paper's: compare how the models rank and differ, not the values."
        )
    if table == "table1" and multi30k_pair(cfg, papers):
        note += f" {multi30k_note(papers)}"
    if table == "table1" and cfg.europarl is not None:  # a corpus that ships its tokens (scoring.py)
        note += (
            " Europarl v1 ships tokenized text: our tokenized BLEU scores its own tokens as they are, sacreBLEU the "
            "Moses-detokenized text. The paper's columns are WMT'14 En→Fr at 1 000 hidden units and 30 000 words: "
            "another corpus, language pair and size."
        )
    return note


def multi30k_note(papers: dict[str, Any]) -> str:
    """What Table 1's Multi30k columns are: the published systems, their scoring, and ours scored alike."""
    spec = papers["multi30k_published"]
    sources = "; ".join(f"{row['short']}: {row['source']}" for row in spec["rows"].values())
    return (
        f"Published: systems on {spec['test_set']} ({sources}; full citations in docs/papers.md). "
        "lc. tok.: ours scored the same way (bleu_lc_tok: hypothesis and reference lowercased, "
        "punctuation-normalised and Moses-tokenized as the Multi30k repository's scripts/task1-tokenize.sh made "
        "its lc.norm.tok files, then multi-bleu.perl's BLEU; signature in bleu.json), the only column of ours to "
        "hold beside them."
    )


BAND_NOTE = (
    "A model trained once per seed: the mean over its runs, [lo, hi] the reproduction band, where the mean of "
    "another set of as many seeds (or the same seeds on another machine) falls with 95 % probability: "
    "mean ± t(0.975; n-1) · s · √(2/n) over the n runs. tables/bleu_by_length_band.csv adds the runs' min–max, "
    "their mean 95 % bootstrap interval (the test set's own uncertainty) and the one-run band, where one new run "
    "falls (√(1 + 1/n) for √(2/n)); tables/bleu_by_length.csv has every run."
)


def by_length_note(table: pd.DataFrame, length_unit: str | None = None, metric: str = "sacreBLEU") -> str:
    """What the BLEU-by-length cells are."""
    unit = f" (length unit: {length_unit})" if length_unit else ""
    note = f"{metric} of each (lo, hi] bucket of source sentence length{unit}; the numbers behind Fig. 2."
    if has_seeds(table):
        return f"{note} {BAND_NOTE}"
    return note + (f" {CI_NOTE}" if table["bleu_ci_lo"].notna().any() else "")


DIVERGED = " (DIVERGED)"  # after the label of a model one of whose runs diverged (every table, every legend)


def mark_diverged(cfg: Config, table: pd.DataFrame, diverged: dict[str, str]) -> tuple[pd.DataFrame, str]:
    """The table with DIVERGED after the label of every model with a diverged run (`diverged`: run -> why), and
    a sentence naming them (empty when none): their numbers are not the model's result, and must not be read as
    one. `table`: one row per model (`model` its base name) or per run (with a `base` column): every run of
    such a model is marked, so that the row of its mean is marked whichever run comes first."""
    if not diverged:
        return table, ""
    bases = {cfg.model(name).base for name in diverged}
    table = table.copy()
    marked = table["base" if "base" in table else "model"].isin(bases) & ~table["label"].str.endswith(DIVERGED)
    table.loc[marked, "label"] = table.loc[marked, "label"] + DIVERGED
    why = "; ".join(f"{name}: {reason}" for name, reason in diverged.items())
    return table, f"WARNING: training diverged ({why}); these rows are marked{DIVERGED}."


def refuse_unmarked_non_finite(table: pd.DataFrame, where: str) -> None:
    """A DataError naming the table, row and column of a number that is not finite (inf; NaN is an empty
    cell) in a row not marked DIVERGED."""
    for column in table.select_dtypes("number").columns:
        for index, value in table[column].items():
            if (
                pd.notna(value)
                and not math.isfinite(float(value))
                and not str(table.at[index, "label"]).endswith(DIVERGED)
            ):
                raise DataError(f"{where}: {table.at[index, 'label']}: {column} is {value}, not a finite number, and "
                                "the run is not marked: its files are damaged; train and score it again")  # fmt: skip


def write_tables(cfg: Config, results: Path, tables: Path, captions: Path, training: TrainingLogs) -> None:
    """tables/{table1,table2,bleu_by_length}.{csv,md,html} and captions/{table1,table2,bleu_by_length_table}.rst
    from every run's files, each checked against the config (`runs`); `training`: the runs' logs, read by
    training's reader."""
    scores = {name: read_bleu(results / name / "bleu.json", cfg.evaluate) for name in cfg.models}
    checkpoints = read_checkpoints(cfg, results, training)
    parameters = {name: ckpt.parameter_count() for name, ckpt in checkpoints.items()}
    captions.mkdir(parents=True, exist_ok=True)

    t1, note1 = table1(cfg, scores, checkpoints=checkpoints), table_notes(cfg, "table1")
    t1, warning = mark_diverged(cfg, t1, training.diverged)
    refuse_unmarked_non_finite(t1, str(tables / "table1"))
    note1 = f"{warning} {note1}" if warning else note1
    note1 += f" {SEEDS_NOTE}" if has_seeds(t1) else ""
    note1 += f" {CI_NOTE}" if t1["all_sacrebleu_ci_lo"].notna().any() else ""
    note1 += f" {provenance_note(t1)}" if provenance_note(t1) else ""
    title1 = f"Table 1 (cf. Bahdanau et al. 2014): BLEU on all test sentences and No UNK, {cfg.dataset}"
    write_table(t1, tables / "table1", title1, note1, table1_view(t1))
    (captions / "table1.rst").write_text(cap.table_caption(note1, cap.table1_findings(t1)), encoding="utf-8")

    t2, note2 = table2(cfg, scores, training.logs, checkpoints, parameters), table_notes(cfg, "table2")
    t2, warning = mark_diverged(cfg, t2, training.diverged)
    refuse_unmarked_non_finite(t2, str(tables / "table2"))
    note2 = f"{warning} {note2}" if warning else note2
    note2 += f" {SEEDS_NOTE}" if has_seeds(t2) else ""
    note2 += f" {provenance_note(t2)}" if provenance_note(t2) else ""
    title2 = f"Table 2 (cf. Vaswani et al. 2017): BLEU and training cost, {cfg.dataset}"
    write_table(t2, tables / "table2", title2, note2, table2_view(t2))
    (captions / "table2.rst").write_text(cap.table_caption(note2, cap.table2_findings(t2)), encoding="utf-8")

    runs = read_bleu_by_length(cfg, results)
    runs["parameters"] = runs["model"].map(parameters)
    runs, warning = mark_diverged(cfg, runs, training.diverged)
    refuse_unmarked_non_finite(runs, str(tables / "bleu_by_length"))
    by_length = bleu_by_length_aggregate(runs)
    wide = bleu_by_length_wide(by_length)
    metric = LENGTH_BLEU[cfg.evaluate.length_bleu]
    note = by_length_note(by_length, next(iter(scores.values())).get("length_unit"), metric)
    note = f"{warning} {note}" if warning else note
    title = f"BLEU by source sentence length, {cfg.dataset} test set"
    write_table(wide, tables / "bleu_by_length", title, note, {c: (c, "{}") for c in wide.columns}, long_form=runs)
    provenance_of = pd.DataFrame([{"base": cfg.model(n).base} | provenance(cfg, n, checkpoints) for n in cfg.models])
    joined = aggregate_runs(provenance_of, ["base"], joined=PROVENANCE_JOINED)[["base", *PROVENANCE_JOINED]]
    band_table(by_length.merge(joined, on="base", how="left")).to_csv(tables / "bleu_by_length_band.csv", index=False)
    findings = cap.bleu_by_length_findings(by_length, {m: label for m, label in zip(by_length.model, by_length.label)})
    (captions / "bleu_by_length_table.rst").write_text(cap.table_caption(note, findings), encoding="utf-8")
