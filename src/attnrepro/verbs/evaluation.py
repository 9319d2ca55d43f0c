"""The evaluation verbs: score (one model's BLEU), tables and figures (every model of a run), compare (a
run against a reference's reproduction bands).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from attnrepro.config import Config, load_config
from attnrepro.errors import DataError

if TYPE_CHECKING:
    from attnrepro.evaluation.runs import TrainingLogs


def training_logs(cfg: Config, results: Path) -> TrainingLogs:
    """Every run's train_log.csv, read by training's own reader, and training's verdict on each (the runs that
    diverged): what the tables and figures are handed (evaluation sits below training and reads neither)."""
    from attnrepro.evaluation.runs import TrainingLogs
    from attnrepro.training.log import read_train_log, run_divergence

    logs = {name: read_train_log(results / name / "train_log.csv") for name in cfg.models}
    diverged = {name: why for name, log in logs.items() if (why := run_divergence(log))}
    return TrainingLogs(logs, diverged)


def cmd_score(args: argparse.Namespace) -> None:
    from attnrepro.data.tokenize import load_tokenizer_pair
    from attnrepro.evaluation.scoring import NoUnkInput, score_files, write_scores

    cfg = load_config(args.config)
    spec = cfg.tokenizer_of(args.model)
    no_unk = None  # "No UNK" exists only for word vocabularies
    if spec.kind == "word":
        src_tok, tgt_tok = load_tokenizer_pair(spec, Path(args.tokenizer_dir), cfg.languages)
        no_unk = NoUnkInput(src_tok, tgt_tok, Path(args.hyp_no_unk))
    unit = "moses" if cfg.wmt is not None else "whitespace"  # what the training filter counts (LENGTH_UNITS)
    paths = (Path(args.src), Path(args.hyp), Path(args.ref))
    pretokenized = cfg.europarl is not None  # Europarl v1 ships tokenized text: scored as the corpus's tokens
    summary, rows = score_files(*paths, cfg.evaluate, cfg.languages, unit, no_unk, pretokenized)
    summary["model"] = args.model
    summary["label"] = cfg.model(args.model).label
    # what the scores were made with, beside `bootstrap`: the tables check it against the config they are read with
    summary["evaluate"] = {"bucket_width": cfg.evaluate.bucket_width, "max_len": cfg.evaluate.max_len}
    for path in (Path(args.json), Path(args.csv)):  # as every other verb, make their folders
        path.parent.mkdir(parents=True, exist_ok=True)
    write_scores(summary, rows, Path(args.json), Path(args.csv))
    print(json.dumps(summary))


def cmd_tables(args: argparse.Namespace) -> None:
    from attnrepro.evaluation.tables import write_tables

    cfg = load_config(args.config)
    results = Path(args.results)
    write_tables(cfg, results, Path(args.out_dir), Path(args.captions), training_logs(cfg, results))


def cmd_figure_length(args: argparse.Namespace) -> None:
    from attnrepro.evaluation.figures import write_bleu_by_length_figure

    cfg = load_config(args.config)
    results = Path(args.results)
    write_bleu_by_length_figure(cfg, results, Path(args.figure), Path(args.caption), training_logs(cfg, results))


def cmd_figure_alignments(args: argparse.Namespace) -> None:
    from attnrepro.evaluation.figures import write_alignments

    cfg = load_config(args.config)
    paths = write_alignments(
        cfg,
        args.model,
        Path(args.attention),
        Path(args.hyp),
        Path(args.src),
        Path(args.tokenizer_dir),
        Path(args.figure),
        Path(args.caption),
    )
    print("\n".join(map(str, paths)))


def cmd_figure_training(args: argparse.Namespace) -> None:
    from attnrepro.evaluation.figures import write_training_curves

    cfg = load_config(args.config)
    results = Path(args.results)
    write_training_curves(cfg, results, Path(args.figure), Path(args.caption), training_logs(cfg, results))


def cmd_compare(args: argparse.Namespace) -> int:
    from attnrepro.evaluation.reproduce import (
        check_same_buckets,
        compare_to_reference,
        comparison_report,
        read_band_table,
    )

    if not 0 <= args.min_inside <= 1:  # also NaN
        raise DataError(f"--min-inside {args.min_inside}: not a fraction in [0, 1] (0.9: 90 % of the cells)")
    table, reference = read_band_table(Path(args.table)), read_band_table(Path(args.reference))
    check_same_buckets(table, Path(args.table), reference, Path(args.reference))
    result = compare_to_reference(table, reference)
    print(comparison_report(result, args.min_inside, args.allow_missing))
    return 0 if result.passes(args.min_inside, args.allow_missing) else 1
