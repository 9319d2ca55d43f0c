"""Tables gathered from finished runs, the papers' numbers beside ours.

- Bahdanau et al. 2014, Table 1: BLEU on all test sentences and on those without an unknown
  word ("No UNK"), one row per configured model, the paper's value beside ours.
- Vaswani et al. 2017, Table 2: BLEU and training FLOPs, one row per configured model; ours are
  estimated as 6 x parameters x tokens seen (see `training_flops`), the paper's from GPU time.
- BLEU by source length (Bahdanau Fig. 2's numbers).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from attnrepro.config import Config
from attnrepro.evaluation import captions as cap
from attnrepro.evaluation.papers import paper_numbers, paper_row, paper_value, short_source
from attnrepro.evaluation.render import write_table
from attnrepro.evaluation.runs import read_bleu, read_checkpoint, read_train_log

FLOPS_NOTE = (
    "Our training FLOPs are an estimate: 6 x parameters x tokens seen (source + target tokens of every "
    "training batch, from train_log.csv), the usual 2 (forward) + 4 (backward) multiply-adds per parameter "
    "and token. It overcounts an encoder-decoder, whose encoder weights see only source tokens and decoder "
    "weights only target tokens, and ignores attention's length-dependent cost. The paper's FLOPs are "
    "training time x GPUs x each GPU's sustained throughput (Vaswani et al. 2017, section 6.1)."
)


def table1(cfg: Config, scores: dict[str, dict[str, Any]], papers: dict[str, Any] | None = None) -> pd.DataFrame:
    """Bahdanau Table 1 for every configured model (paper row beside ours), then the paper's rows no model has."""
    papers = paper_numbers() if papers is None else papers
    rows, used = [], set()
    for name, model in cfg.models.items():
        s = scores[name]
        paper = paper_row(model, "bahdanau2014_table1", "sutskever2014_table1", papers=papers)
        no_unk = s["no_unk"]
        if paper is not None:
            used.add((paper.table, paper.name))
        rows.append(
            {
                "model": name,
                "label": model.label,
                "arch": model.arch,
                "train_max_len": model.train.max_src_len,
                "all_tokenized": s["bleu_tokenized"],
                "all_paper": paper_value(paper, "all"),
                "no_unk_tokenized": no_unk.get("bleu_tokenized") if no_unk["applies"] else None,
                "no_unk_paper": paper_value(paper, "no_unk"),
                "no_unk_sentences": no_unk.get("n_sentences") if no_unk["applies"] else None,
                "n_sentences": s["n_sentences"],
                "all_sacrebleu": s["bleu"],
                "no_unk_sacrebleu": no_unk.get("bleu") if no_unk["applies"] else None,
                "paper_row": f"{papers[paper.table]['source']}: {paper.name}" if paper else None,
                "paper_short": f"{short_source(papers[paper.table]['source'])}: {paper.name}" if paper else None,
            }
        )
    source = papers["bahdanau2014_table1"]["source"]
    for name, values in papers["bahdanau2014_table1"]["rows"].items():
        if ("bahdanau2014_table1", name) not in used:
            rows.append(
                {
                    "model": None,
                    "label": f"{name} (paper only)",
                    "all_paper": values.get("all"),
                    "no_unk_paper": values.get("no_unk"),
                    "paper_row": f"{source}: {name}",
                    "paper_short": f"{short_source(source)}: {name}",
                }
            )
    return pd.DataFrame(rows, columns=TABLE1_COLUMNS)


# column -> (header, format) of the Markdown/HTML view; the CSV keeps every column under its key.
TABLE1_VIEW = {
    "label": ("model", "{}"),
    "train_max_len": ("trained on ≤ words", "{:.0f}"),
    "all_tokenized": ("All, ours (tok. BLEU)", "{:.2f}"),
    "all_paper": ("All, paper", "{:.2f}"),
    "no_unk_tokenized": ("No UNK, ours (tok. BLEU)", "{:.2f}"),
    "no_unk_paper": ("No UNK, paper", "{:.2f}"),
    "no_unk_sentences": ("No UNK sentences", "{:.0f}"),
    "all_sacrebleu": ("All, ours (sacreBLEU)", "{:.2f}"),
    "paper_short": ("paper row", "{}"),
}
TABLE1_COLUMNS = [
    "model", "label", "arch", "train_max_len", "all_tokenized", "all_paper", "no_unk_tokenized", "no_unk_paper",
    "no_unk_sentences", "n_sentences", "all_sacrebleu", "no_unk_sacrebleu", "paper_row", "paper_short",
]  # fmt: skip


def training_flops(parameters: int, src_tokens: float, tgt_tokens: float) -> float:
    """6 N D (Kaplan et al. 2020's C ≈ 6ND) with D = source + target tokens seen: see FLOPS_NOTE."""
    return 6.0 * parameters * (src_tokens + tgt_tokens)


def table2(
    cfg: Config,
    scores: dict[str, dict[str, Any]],
    logs: dict[str, pd.DataFrame],
    parameters: dict[str, int],
    papers: dict[str, Any] | None = None,
) -> pd.DataFrame:
    """Vaswani Table 2 for every configured model: BLEU, parameters, tokens seen, estimated training FLOPs."""
    papers = paper_numbers() if papers is None else papers
    rows = []
    for name, model in cfg.models.items():
        last = logs[name].iloc[-1]
        src_tokens, tgt_tokens = last["src_tokens"], last["tgt_tokens"]
        known = not (pd.isna(src_tokens) or pd.isna(tgt_tokens))
        paper = paper_row(model, "vaswani2017_table2", papers=papers)
        rows.append(
            {
                "model": name,
                "label": model.label,
                "arch": model.arch,
                "bleu_tokenized": scores[name]["bleu_tokenized"],
                "bleu_sacrebleu": scores[name]["bleu"],
                "paper_en_de": paper_value(paper, "en_de"),
                "paper_en_fr": paper_value(paper, "en_fr"),
                "parameters": parameters[name],
                "steps": int(last["step"]),
                "tokens_seen": int(src_tokens + tgt_tokens) if known else None,
                "train_flops_estimate": training_flops(parameters[name], src_tokens, tgt_tokens) if known else None,
                "paper_train_flops": paper_value(paper, "flops"),
            }
        )
    return pd.DataFrame(rows, columns=TABLE2_COLUMNS)


TABLE2_VIEW = {
    "label": ("model", "{}"),
    "bleu_tokenized": ("BLEU, ours (tok.)", "{:.2f}"),
    "bleu_sacrebleu": ("BLEU, ours (sacreBLEU)", "{:.2f}"),
    "paper_en_de": ("EN-DE, paper", "{:.1f}"),
    "paper_en_fr": ("EN-FR, paper", "{:.1f}"),
    "parameters": ("parameters", "{:,.0f}"),
    "steps": ("steps", "{:,.0f}"),
    "tokens_seen": ("tokens seen (src+tgt)", "{:,.0f}"),
    "train_flops_estimate": ("training FLOPs, ours (estimate)", "{:.2e}"),
    "paper_train_flops": ("training FLOPs, paper", "{:.1e}"),
}
TABLE2_COLUMNS = [
    "model", "label", "arch", "bleu_tokenized", "bleu_sacrebleu", "paper_en_de", "paper_en_fr", "parameters", "steps",
    "tokens_seen", "train_flops_estimate", "paper_train_flops",
]  # fmt: skip


def bleu_by_length_table(per_model: dict[str, Path], labels: dict[str, str]) -> pd.DataFrame:
    """One row per model x bucket: model, label, bucket_lo, bucket_hi, n_sentences, bleu."""
    frames = []
    for model, path in per_model.items():
        frame = pd.read_csv(path)
        frame.insert(0, "label", labels.get(model, model))
        frame.insert(0, "model", model)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def bleu_by_length_wide(table: pd.DataFrame) -> pd.DataFrame:
    """Buckets as rows ("1–10", ...), one BLEU column per model label, for Markdown."""
    wide = table.pivot_table(index=["bucket_lo", "bucket_hi"], columns="label", values="bleu", sort=False)
    wide = wide[list(dict.fromkeys(table["label"]))]
    wide.index = [f"{lo + 1}–{hi}" for lo, hi in wide.index]
    wide.index.name = "source words"
    return wide.reset_index()


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
    return note


def labels(cfg: Config) -> dict[str, str]:
    return {name: m.label for name, m in cfg.models.items()}


def by_length_files(cfg: Config, results: Path) -> dict[str, Path]:
    return {name: results / name / "bleu_by_length.csv" for name in cfg.models}


def write_tables(cfg: Config, results: Path, tables: Path, captions: Path) -> None:
    """tables/{table1,table2,bleu_by_length}.{csv,md,html} and captions/{table1,table2,bleu_by_length_table}.rst."""
    scores = {name: read_bleu(results / name / "bleu.json") for name in cfg.models}
    logs = {name: read_train_log(results / name / "train_log.csv") for name in cfg.models}
    parameters = {name: read_checkpoint(results / name / "checkpoint.pt").parameter_count() for name in cfg.models}
    captions.mkdir(parents=True, exist_ok=True)

    t1, note1 = table1(cfg, scores), table_notes(cfg, "table1")
    title1 = f"Table 1 (cf. Bahdanau et al. 2014): BLEU on all test sentences and No UNK, {cfg.dataset}"
    write_table(t1, tables / "table1", title1, note1, TABLE1_VIEW)
    (captions / "table1.rst").write_text(cap.table_caption(note1, cap.table1_findings(t1)), encoding="utf-8")

    t2, note2 = table2(cfg, scores, logs, parameters), table_notes(cfg, "table2")
    title2 = f"Table 2 (cf. Vaswani et al. 2017): BLEU and training cost, {cfg.dataset}"
    write_table(t2, tables / "table2", title2, note2, TABLE2_VIEW)
    (captions / "table2.rst").write_text(cap.table_caption(note2, cap.table2_findings(t2)), encoding="utf-8")

    by_length = bleu_by_length_table(by_length_files(cfg, results), labels(cfg))
    wide = bleu_by_length_wide(by_length)
    note = "sacreBLEU of each (lo, hi] bucket of source sentence length; the numbers behind Fig. 2."
    view = {c: (c, "{}" if c == "source words" else "{:.2f}") for c in wide.columns}
    title = f"BLEU by source sentence length, {cfg.dataset} test set"
    write_table(wide, tables / "bleu_by_length", title, note, view, long_form=by_length)
    findings = cap.bleu_by_length_findings(by_length, labels(cfg))
    (captions / "bleu_by_length_table.rst").write_text(cap.table_caption(note, findings), encoding="utf-8")
