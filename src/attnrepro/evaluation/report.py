"""Tables gathered from finished runs, the papers' numbers beside ours, and the generated
"what we see" paragraphs that the Snakemake report's captions include.

- Bahdanau et al. 2014, Table 1: BLEU on all test sentences and on those without an unknown
  word ("No UNK"), one row per configured model, the paper's value beside ours.
- Vaswani et al. 2017, Table 2: BLEU and training FLOPs, one row per configured model; ours are
  estimated as 6 x parameters x tokens seen (see `training_flops`), the paper's from GPU time.
- BLEU by source length (Bahdanau Fig. 2's numbers).

The papers' numbers come only from `paper_numbers.yaml` (copied from ../shared/PAPERS.md).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from attnrepro.config import Config, ModelConfig
from attnrepro.data.text import read_lines

PAPER_NUMBERS = Path(__file__).with_name("paper_numbers.yaml")
FLOPS_NOTE = (
    "Our training FLOPs are an estimate: 6 x parameters x tokens seen (source + target tokens of every "
    "training batch, from train_log.csv), the usual 2 (forward) + 4 (backward) multiply-adds per parameter "
    "and token. It overcounts an encoder-decoder, whose encoder weights see only source tokens and decoder "
    "weights only target tokens, and ignores attention's length-dependent cost. The paper's FLOPs are "
    "training time x GPUs x each GPU's sustained throughput (Vaswani et al. 2017, section 6.1)."
)


@cache
def paper_numbers(path: Path = PAPER_NUMBERS) -> dict[str, Any]:
    """The papers' tables (see paper_numbers.yaml); nothing here that ../shared/PAPERS.md lacks."""
    return yaml.safe_load(path.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class PaperRow:
    table: str  # key in paper_numbers.yaml, e.g. bahdanau2014_table1
    name: str  # the paper's row name
    values: dict[str, Any]


def paper_row(model: ModelConfig, *tables: str, papers: dict[str, Any] | None = None) -> PaperRow | None:
    """The first paper row (searching `tables` in order) that lists the model's label or config name."""
    papers = paper_numbers() if papers is None else papers
    for table in tables:
        for name, values in papers[table]["rows"].items():
            if model.label in values.get("labels", []) or model.name in values.get("labels", []):
                return PaperRow(table, name, values)
    return None


def read_bleu(path: Path) -> dict[str, Any]:
    """A model's bleu.json; an old one without the tokenized scores raises naming the file."""
    scores = json.loads(path.read_text(encoding="utf-8"))
    if "bleu_tokenized" not in scores or "no_unk" not in scores:
        raise ValueError(f"{path}: no bleu_tokenized/no_unk (written by an older `attnrepro score`; rerun score)")
    return scores


def read_train_log(path: Path) -> pd.DataFrame:
    """train_log.csv; columns a run did not log (older logs) come back empty."""
    log = pd.read_csv(path)
    for column in ("valid_loss", "src_tokens", "tgt_tokens", "valid_bleu"):
        if column not in log:
            log[column] = math.nan
    return log


def training_length(model: ModelConfig, log: pd.DataFrame | None = None) -> str:
    """How a model was trained, for legends: sentence-length limit and updates done."""
    steps = int(log["step"].iloc[-1]) if log is not None and len(log) else model.train.max_steps
    return f"trained on ≤{model.train.max_src_len} words, {steps:,} steps"


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
                "all_paper": _paper_value(paper, "all"),
                "no_unk_tokenized": no_unk.get("bleu_tokenized") if no_unk["applies"] else None,
                "no_unk_paper": _paper_value(paper, "no_unk"),
                "no_unk_sentences": no_unk.get("n_sentences") if no_unk["applies"] else None,
                "n_sentences": s["n_sentences"],
                "all_sacrebleu": s["bleu"],
                "no_unk_sacrebleu": no_unk.get("bleu") if no_unk["applies"] else None,
                "paper_row": f"{papers[paper.table]['source']}: {paper.name}" if paper else None,
                "paper_short": f"{_short(papers[paper.table]['source'])}: {paper.name}" if paper else None,
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
                    "paper_short": f"{_short(source)}: {name}",
                }
            )
    return pd.DataFrame(rows, columns=TABLE1_COLUMNS)


# column -> (header, format) of the Markdown/reST view; the CSV keeps every column under its key.
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


def parameter_count(checkpoint: Path) -> int:
    """Trainable parameters of the model a checkpoint rebuilds (counted on the meta device, no weights read)."""
    import torch

    from attnrepro.models import build_model, count_parameters

    try:
        ckpt = torch.load(checkpoint, map_location="cpu", weights_only=True, mmap=True)
        arch, params, src_vocab, tgt_vocab = (ckpt[k] for k in ("arch", "params", "src_vocab", "tgt_vocab"))
    except Exception as err:
        raise ValueError(f"{checkpoint}: cannot read the model's arch/params/vocabularies ({err})") from err
    with torch.device("meta"):
        return count_parameters(build_model(arch, src_vocab, tgt_vocab, params))


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
                "paper_en_de": _paper_value(paper, "en_de"),
                "paper_en_fr": _paper_value(paper, "en_fr"),
                "parameters": parameters[name],
                "steps": int(last["step"]),
                "tokens_seen": int(src_tokens + tgt_tokens) if known else None,
                "train_flops_estimate": training_flops(parameters[name], src_tokens, tgt_tokens) if known else None,
                "paper_train_flops": _paper_value(paper, "flops"),
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


def write_table(table: pd.DataFrame, stem: Path, title: str, note: str = "", view: dict | None = None) -> None:
    """stem.csv with every column under its key; stem.md and stem.html (shown in the Snakemake report)
    with the `view` columns under readable headers, and the note."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(stem.with_name(stem.name + ".csv"), index=False)
    stem.with_name(stem.name + ".md").write_text(markdown(table, view, note), encoding="utf-8")
    stem.with_name(stem.name + ".html").write_text(html_page(table, title, view, note), encoding="utf-8")


HTML_STYLE = (
    "body{font-family:sans-serif;margin:1.5em;color:#1e293b}table{border-collapse:collapse;font-size:14px}"
    "th,td{border:1px solid #cbd5e1;padding:4px 8px}th{background:#f1f5f9}td{text-align:right}"
    "td:first-child{text-align:left}p{max-width:60em;font-size:13px}"
)


def html_page(table: pd.DataFrame, title: str, view: dict | None = None, note: str = "") -> str:
    """A small standalone HTML page of the table (no scripts, no external resources)."""
    import html

    body = displayed(table, view).to_html(index=False, border=0, escape=True)
    return (
        f"<!doctype html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{HTML_STYLE}</style></head>\n<body><h2>{html.escape(title)}</h2>\n{body}\n"
        f"<p>{html.escape(note)}</p></body></html>\n"
    )


def displayed(table: pd.DataFrame, view: dict[str, tuple[str, str]] | None = None) -> pd.DataFrame:
    """The view's columns as formatted strings (blank where missing) under their headers; all columns if no view."""
    view = view or {c: (c, "{}") for c in table.columns}
    cells = {
        header: [fmt.format(v) if not _missing(v) else "" for v in table[column]]
        for column, (header, fmt) in view.items()
    }
    return pd.DataFrame(cells)


def markdown(table: pd.DataFrame, view: dict | None = None, note: str = "") -> str:
    text = displayed(table, view).to_markdown(index=False, disable_numparse=True)
    return text + "\n" + (f"\n{note}\n" if note else "")


def rst_table(table: pd.DataFrame, view: dict | None = None) -> str:
    """The table as a reStructuredText grid table (for the report captions)."""
    return displayed(table, view).to_markdown(index=False, tablefmt="grid", disable_numparse=True) + "\n"


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


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _short(source: str) -> str:
    """'Bahdanau, Cho, Bengio 2014, Table 1' -> 'Bahdanau 2014, Table 1'."""
    authors, _, rest = source.partition(" 20")
    return f"{authors.split(',')[0].split(' ')[0]} 20{rest}"


def _paper_value(row: PaperRow | None, key: str) -> Any:
    return None if row is None else row.values.get(key)


# Everything below reads a finished run's files and writes one rule's outputs; the CLI verbs call it.


def _labels(cfg: Config) -> dict[str, str]:
    return {name: m.label for name, m in cfg.models.items()}


def _dashed(cfg: Config) -> list[str]:
    """Models without attention (drawn dashed in every figure)."""
    from attnrepro.evaluation.plots import has_attention

    return [name for name, m in cfg.models.items() if not has_attention(m.arch)]


def write_tables(cfg: Config, results: Path, tables: Path, captions: Path) -> None:
    """tables/{table1,table2,bleu_by_length}.{csv,md,html} and captions/{table1,table2,bleu_by_length_table}.rst."""
    from attnrepro.evaluation import captions as cap

    scores = {name: read_bleu(results / name / "bleu.json") for name in cfg.models}
    logs = {name: read_train_log(results / name / "train_log.csv") for name in cfg.models}
    parameters = {name: parameter_count(results / name / "checkpoint.pt") for name in cfg.models}
    captions.mkdir(parents=True, exist_ok=True)

    t1, note1 = table1(cfg, scores), table_notes(cfg, "table1")
    title1 = f"Table 1 (cf. Bahdanau et al. 2014): BLEU on all test sentences and No UNK, {cfg.dataset}"
    write_table(t1, tables / "table1", title1, note1, TABLE1_VIEW)
    (captions / "table1.rst").write_text(cap.table_caption(note1, cap.table1_findings(t1)), encoding="utf-8")

    t2, note2 = table2(cfg, scores, logs, parameters), table_notes(cfg, "table2")
    title2 = f"Table 2 (cf. Vaswani et al. 2017): BLEU and training cost, {cfg.dataset}"
    write_table(t2, tables / "table2", title2, note2, TABLE2_VIEW)
    (captions / "table2.rst").write_text(cap.table_caption(note2, cap.table2_findings(t2)), encoding="utf-8")

    per_model = {name: results / name / "bleu_by_length.csv" for name in cfg.models}
    by_length = bleu_by_length_table(per_model, _labels(cfg))
    wide = bleu_by_length_wide(by_length)
    note = "sacreBLEU of each (lo, hi] bucket of source sentence length; the numbers behind Fig. 2."
    view = {c: (c, "{}" if c == "source words" else "{:.2f}") for c in wide.columns}
    by_length.to_csv(tables / "bleu_by_length.csv", index=False)  # long form: one row per model x bucket
    (tables / "bleu_by_length.md").write_text(markdown(wide, view, note), encoding="utf-8")
    title = f"BLEU by source sentence length, {cfg.dataset} test set"
    (tables / "bleu_by_length.html").write_text(html_page(wide, title, view, note), encoding="utf-8")
    findings = cap.bleu_by_length_findings(by_length, _labels(cfg))
    (captions / "bleu_by_length_table.rst").write_text(cap.table_caption(note, findings), encoding="utf-8")


def is_full_run_of(cfg: Config, dataset: str) -> bool:
    """A run on the paper's own data (a WMT config of that dataset), not the synthetic stand-in."""
    return cfg.wmt is not None and cfg.dataset == dataset


def fig2_paper_points(cfg: Config, papers: dict[str, Any] | None = None) -> dict[str, list[list[float]]]:
    """Bahdanau Fig. 2's points from paper_numbers.yaml ("paper: <row>" -> [[length, BLEU], ...]), only on a
    full run of the paper's dataset; empty otherwise, and empty while PAPERS.md gives no per-length numbers."""
    papers = paper_numbers() if papers is None else papers
    fig2 = papers["bahdanau2014_fig2"]
    if not is_full_run_of(cfg, fig2["dataset"]):
        return {}
    return {f"paper: {label}": [list(p) for p in points] for label, points in (fig2["points"] or {}).items()}


def write_bleu_by_length_figure(
    cfg: Config, results: Path, out_stem: Path, caption: Path, papers: dict[str, Any] | None = None
) -> None:
    """Fig. 2 as out_stem.{png,pdf}; the paper's points only on a full run of the paper's dataset."""
    from attnrepro.evaluation import captions as cap
    from attnrepro.evaluation.plots import bleu_by_length_figure, save

    papers = paper_numbers() if papers is None else papers
    per_model = {name: results / name / "bleu_by_length.csv" for name in cfg.models}
    table = bleu_by_length_table(per_model, _labels(cfg))
    legends = {
        name: f"{m.label} ({training_length(m, read_train_log(results / name / 'train_log.csv'))})"
        for name, m in cfg.models.items()
    }
    fig2 = papers["bahdanau2014_fig2"]
    full_run = is_full_run_of(cfg, fig2["dataset"])
    points = fig2_paper_points(cfg, papers)
    title = f"BLEU by source sentence length, {cfg.dataset} test set\n(cf. Bahdanau et al. 2014, Fig. 2)"
    save(bleu_by_length_figure(table, legends, title, _dashed(cfg), points), out_stem)
    findings = cap.bleu_by_length_findings(table, legends)
    if not points:
        findings.append(
            "No paper points are drawn: "
            + (
                "the paper gives Fig. 2 as curves only (no per-length numbers in ../shared/PAPERS.md)."
                if full_run
                else f"this is not a full {fig2['dataset']} run."
            )
        )
    caption.parent.mkdir(parents=True, exist_ok=True)
    caption.write_text(cap.bullets(findings), encoding="utf-8")


def token_strings(tokenizer: Any, line: str) -> list[str]:
    """The tokens a model saw for `line`, one per id: words (unknown ones marked) or sentencepiece pieces."""
    from attnrepro.data.tokenize import UNK, WordVocab

    ids = tokenizer.encode(line)
    if hasattr(tokenizer, "tokenize"):  # Moses word path
        words = tokenizer.tokenize(line)
    elif isinstance(tokenizer, WordVocab):
        words = line.split()
    else:
        return tokenizer.pieces(ids)
    return [f"{w} (UNK)" if i == UNK and w != "<unk>" else w for w, i in zip(words, ids)]


def alignment_sentences(cfg: Config, test_src: Path) -> list[int]:
    from attnrepro.evaluation.plots import select_alignment_sentences

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
    from attnrepro.data.tokenize import load_tokenizer
    from attnrepro.decoding.attention_file import load_attention
    from attnrepro.evaluation import captions as cap
    from attnrepro.evaluation.plots import alignment_figure, has_attention, save

    mc = cfg.model(model)
    if not has_attention(mc.arch):
        raise ValueError(f"models.{model}: arch {mc.arch!r} has no attention to plot")
    spec, (src_lang, tgt_lang) = cfg.tokenizer_of(model), cfg.languages
    src_tok = load_tokenizer(spec, tokenizer_dir / "src.model", src_lang)
    tgt_tok = load_tokenizer(spec, tokenizer_dir / "tgt.model", tgt_lang)
    sources = read_lines(test_src)
    hypotheses = read_lines(hyp)
    weights = load_attention(attention)
    if not len(sources) == len(hypotheses) == len(weights):
        raise ValueError(f"{test_src}, {hyp}, {attention}: {len(sources)}, {len(hypotheses)}, {len(weights)} sentences")
    paths, described = [], []
    for k, index in enumerate(alignment_sentences(cfg, test_src)):
        w = weights[index]
        src_tokens = token_strings(src_tok, sources[index])
        tgt_tokens = token_strings(tgt_tok, hypotheses[index])
        if len(tgt_tokens) != w.shape[0]:  # a subword re-encoding may differ from the searched pieces
            tgt_tokens = [f"#{i + 1}" for i in range(w.shape[0])]
        if w.size and len(src_tokens) != w.shape[1]:
            raise ValueError(f"{attention}: sentence {index + 1} has {w.shape[1]} source positions, "
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


def write_training_curves(cfg: Config, results: Path, out_stem: Path, caption: Path) -> None:
    from attnrepro.evaluation import captions as cap
    from attnrepro.evaluation.plots import save, training_curves_figure

    logs = {name: read_train_log(results / name / "train_log.csv") for name in cfg.models}
    labels = {name: f"{m.label} ({training_length(m, logs[name])})" for name, m in cfg.models.items()}
    title = f"Training curves, {cfg.dataset}"
    save(training_curves_figure(logs, labels, title, _dashed(cfg)), out_stem)
    caption.parent.mkdir(parents=True, exist_ok=True)
    caption.write_text(cap.bullets(cap.training_findings(logs, _labels(cfg))), encoding="utf-8")
