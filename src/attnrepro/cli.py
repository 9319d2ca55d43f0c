"""`attnrepro` console script: one sub-command per workflow rule, plus `params`.

Every verb reads the validated configuration through `attnrepro.config.load_config`.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from attnrepro.errors import AttnreproError, ConfigError, DataError
from attnrepro.verbs import TOKENIZER_FILES
from attnrepro.verbs.cluster import cmd_estimate, cmd_launch, cmd_params
from attnrepro.verbs.data import (
    cmd_clean,
    cmd_download,
    cmd_encode,
    cmd_europarl_download,
    cmd_europarl_extract,
    cmd_extract,
    cmd_generate,
    cmd_tokenizer,
)
from attnrepro.verbs.evaluation import (
    cmd_compare,
    cmd_figure_alignments,
    cmd_figure_length,
    cmd_figure_training,
    cmd_score,
    cmd_tables,
)
from attnrepro.verbs.model import cmd_average, cmd_train, cmd_translate
from attnrepro.verbs.regenerate import TARGETS, cmd_regenerate

INTERRUPTED_EXIT_CODE = 128 + signal.SIGINT  # what a shell reports for a command that Ctrl-C stopped
BROKEN_PIPE_EXIT_CODE = 128 + signal.SIGPIPE  # ... and for one whose reader closed the pipe (`yes | head -1`)


def add_input(parser: argparse.ArgumentParser, flag: str, holds: tuple[str, ...] = (), **kwargs) -> None:
    """An argument naming a file or folder the verb reads (a folder: holding the files `holds`); `main`
    checks that they exist before the verb runs."""
    action = parser.add_argument(flag, **kwargs)
    parser.set_defaults(inputs=(*parser.get_default("inputs"), (flag, action.dest, holds)))


def check_inputs(args: argparse.Namespace) -> None:
    """A `DataError` naming the first input argument whose path does not exist (one line, not a traceback)."""
    config = getattr(args, "config", None)
    if config is not None and not Path(config).is_file():  # the first argument, named first (as load_config does)
        raise ConfigError(f"{config}: no such config file")
    for flag, dest, holds in args.inputs:
        path = getattr(args, dest)
        if path is None:
            continue
        if not Path(path).exists():
            raise DataError(f"{flag} {path}: no such file or folder")
        missing = [name for name in holds if not (Path(path) / name).is_file()]
        if missing:
            raise DataError(f"{flag} {path}: has no {' or '.join(missing)} (what the tokenizer rule writes)")


def _data_verbs(verb: Callable[[str, Callable, str], argparse.ArgumentParser]) -> None:
    """generate, download, extract, clean, tokenizer, encode: the corpus, up to token ids."""
    p = verb("generate", cmd_generate, "write the synthetic corpus")
    p.add_argument("--out-dir", required=True)

    p = verb("download", cmd_download, "fetch one of data.wmt.files (from data.wmt.mirror if there): resumed, verified")
    p.add_argument("--file", required=True, help="a name under data.wmt.files")
    p.add_argument("--out", required=True)
    p.add_argument("--lock", required=True, help="lock file pinning sizes/sha256 the config does not give")

    p = verb("extract", cmd_extract, "one corpus of data.wmt.corpora from its downloaded files, as plain text")
    p.add_argument("--corpus", required=True)
    add_input(p, "--src-input", required=True, help="the downloaded file holding the source side")
    add_input(p, "--tgt-input", required=True, help="the one holding the target side (the same archive for both)")
    p.add_argument("--src", required=True)
    p.add_argument("--tgt", required=True)

    p = verb("europarl-download", cmd_europarl_download, "every day file of data.europarl: verified, resumed")
    p.add_argument("--out-dir", required=True, help="the corpus root on disk (data.europarl.download_dir)")

    p = verb("europarl-extract", cmd_europarl_extract, "one split of data.europarl by date, decoded, as UTF-8 text")
    p.add_argument("--split", required=True, choices=["train", "valid", "test"])
    add_input(p, "--download-dir", required=True, help="where europarl-download put the day files")
    p.add_argument("--out-dir", required=True, help="writes {split}.src, {split}.tgt, {split}.ids")

    p = verb("clean", cmd_clean, "validate, normalise and filter one split; counts to {split}.manifest.json")
    p.add_argument("--split", required=True)
    add_input(p, "--raw-dir", required=True, help="where extract wrote {corpus}.src/.tgt")
    p.add_argument("--out-dir", required=True)

    p = verb("tokenizer", cmd_tokenizer, "train the source/target tokenizers (sentencepiece or word shortlist)")
    p.add_argument("--name", required=True, help="a name under tokenizers")
    add_input(p, "--src", required=True)
    add_input(p, "--tgt", required=True)
    p.add_argument("--out-dir", required=True)
    p.add_argument("--threads", type=int, default=1, help="sentencepiece threads, or processes counting words")

    p = verb("encode", cmd_encode, "encode a parallel text into token ids")
    p.add_argument("--name", required=True, help="a name under tokenizers")
    add_input(p, "--tokenizer-dir", TOKENIZER_FILES, required=True)
    add_input(p, "--src", required=True)
    add_input(p, "--tgt", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--threads", type=int, default=1, help="processes encoding chunks of lines (same output)")


def _model_verbs(verb: Callable[[str, Callable, str], argparse.ArgumentParser]) -> None:
    """train, average, translate, score: one model, from its training to its BLEU."""
    p = verb("train", cmd_train, "train one model (resumes from its last checkpoint)")
    p.add_argument("--model", required=True)
    add_input(p, "--tokenizer-dir", TOKENIZER_FILES, required=True)
    add_input(p, "--train", required=True)
    add_input(p, "--valid", required=True)
    p.add_argument("--out-dir", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--no-progress", action="store_true")

    p = verb("average", cmd_average, "average the last train.average_last checkpoints (Vaswani et al. 2017, 6.1)")
    p.add_argument("--model", required=True)
    add_input(p, "--checkpoint", required=True, help="the final checkpoint.pt; the others are in its resume/kept/")
    p.add_argument("--out", required=True)

    p = verb("translate", cmd_translate, "beam-search a source file")
    p.add_argument("--model", help="the model's tokenizer and search settings (default: the only tokenizer)")
    add_input(p, "--checkpoint", required=True)
    add_input(p, "--tokenizer-dir", TOKENIZER_FILES, required=True)
    add_input(p, "--src", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--attention", required=True)
    add_input(p, "--ref", required=True, help="the references of --src: they define the No UNK subset")
    p.add_argument("--out-no-unk", required=True, help="the No UNK subset's translations, UNK banned (empty: subwords)")
    p.add_argument("--threads", type=int, default=1)

    p = verb("score", cmd_score, "sacreBLEU and tokenized BLEU, overall, by source length, and on No UNK")
    p.add_argument("--model", required=True)
    add_input(
        p, "--tokenizer-dir", TOKENIZER_FILES, help="the model's tokenizer (word vocabularies: the No UNK subset)"
    )
    add_input(p, "--src", required=True)
    add_input(p, "--hyp", required=True)
    add_input(p, "--hyp-no-unk", required=True, help="translate's --out-no-unk (read for word vocabularies)")
    add_input(p, "--ref", required=True)
    p.add_argument("--json", required=True)
    p.add_argument("--csv", required=True)


def _report_verbs(verb: Callable[[str, Callable, str], argparse.ArgumentParser]) -> None:
    """tables, figures and the cost estimate, over every model of a run."""
    p = verb("tables", cmd_tables, "Table 1 (Bahdanau), Table 2 (Vaswani), BLEU by length: CSV, Markdown, HTML")
    add_input(p, "--results", required=True, help="results/{dataset}")
    p.add_argument("--out-dir", required=True, help="results/{dataset}/tables")
    p.add_argument("--captions", required=True, help="folder for the report captions' generated parts")

    p = verb("figure-length", cmd_figure_length, "Fig. 2: BLEU by source length for every model")
    add_input(p, "--results", required=True, help="results/{dataset}")
    p.add_argument("--figure", required=True, help="path without suffix; .png and .pdf are written")
    p.add_argument("--caption", required=True, help="the report caption's generated part (.rst)")

    p = verb("figure-alignments", cmd_figure_alignments, "Fig. 3: alignment heatmaps of one attention model")
    p.add_argument("--model", required=True)
    add_input(p, "--attention", required=True, help="the model's attn.npz")
    add_input(p, "--hyp", required=True)
    add_input(p, "--src", required=True, help="the test source text")
    add_input(p, "--tokenizer-dir", TOKENIZER_FILES, required=True)
    p.add_argument("--figure", required=True, help="path prefix; _0.png .. _{n_alignments-1}.png are written")
    p.add_argument("--caption", required=True)

    p = verb("figure-training", cmd_figure_training, "training and validation curves of every model")
    add_input(p, "--results", required=True, help="results/{dataset}")
    p.add_argument("--figure", required=True, help="path without suffix; .png and .pdf are written")
    p.add_argument("--caption", required=True)

    p = verb("estimate", cmd_estimate, "parameters, training FLOPs (6 N D) and GPU-hours of every model")
    p.add_argument("--overlay", nargs="+", default=[], help="configs merged over --config, as Snakemake merges")
    p.add_argument("--out", help="also write the table to this CSV file (default: print only, write nothing)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnrepro", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def verb(name: str, func, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help)
        p.add_argument("--config", required=True, help="validated config YAML")
        p.set_defaults(func=func, inputs=())
        return p

    _data_verbs(verb)
    _model_verbs(verb)
    _report_verbs(verb)

    p = sub.add_parser("launch", help="run a verb on N GPUs (torchrun for N > 1); a preempted run requeues")
    p.add_argument("--gpus", type=int, default=1, help="GPUs of this job; > 1 starts one process per GPU")
    p.add_argument("--no-requeue", action="store_true", help="on preemption exit 75 without scontrol requeue")
    p.add_argument("verb", nargs=argparse.REMAINDER, help="-- VERB ARGS..., e.g. -- train --config ...")
    p.set_defaults(func=cmd_launch, inputs=())

    p = sub.add_parser("compare", help="a run's BLEU by length against a reference's reproduction bands, the "
                       "one-run band for a run of one seed (exit 1: fewer than --min-inside of the reference's "
                       "cells inside, or a cell not checked)")  # fmt: skip
    p.set_defaults(func=cmd_compare, inputs=())
    add_input(p, "--reference", required=True, help="a bleu_by_length_band.csv, e.g. docs/figures/bleu_by_length.csv")
    add_input(p, "--table", required=True, help="the run's results/{dataset}/tables/bleu_by_length_band.csv")
    p.add_argument("--min-inside", type=float, default=0.9, help="fraction of cells whose mean must be inside (0.9)")
    missing = "count only the reference's cells the run has (default: a cell missing, or without a band, fails)"
    p.add_argument("--allow-missing", action="store_true", help=missing)

    derived = "rewrite the derived parts of committed files from their one source (registry, configs, figure table)"
    p = sub.add_parser("regenerate", help=derived)
    p.set_defaults(func=cmd_regenerate, inputs=())
    p.add_argument("targets", nargs="*", metavar="TARGET", help=f"{', '.join(TARGETS)} (default: all)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when a target differs from its source")
    p.add_argument("--root", default=".", help="the repository's root (default: here)")

    p = verb("params", cmd_params, "print a model's parameter count (last line: the integer)")
    p.add_argument("--model", required=True)
    add_input(p, "--tokenizer-dir", TOKENIZER_FILES, help="default: results/{dataset}/tokenizer/{tokenizer}")
    p.add_argument("--src-vocab", type=int, help="default: the trained tokenizer's, else its vocab_size (+ specials)")
    p.add_argument("--tgt-vocab", type=int)

    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one verb: a problem the user can fix (`AttnreproError`) is one line on stderr and exit status 1."""
    args = build_parser().parse_args(argv)
    try:
        check_inputs(args)
        status = args.func(args)
        sys.stdout.flush()  # here, not at exit: a reader that stopped (`| head -1`) is caught below
    except BrokenPipeError:  # the reader stopped (`| head -1`): what a shell reports for SIGPIPE, no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's own flush at exit must not fail
        return BROKEN_PIPE_EXIT_CODE
    except AttnreproError as err:  # anything else is a bug of ours and shows its traceback
        print(f"attnrepro {args.command}: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C outside training's own handling: the shell's status for SIGINT
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not turn this line into a traceback
        print(f"attnrepro {args.command}: interrupted; its outputs are not complete", file=sys.stderr)
        return INTERRUPTED_EXIT_CODE
    return status if isinstance(status, int) else 0  # launch passes on its command's exit status


if __name__ == "__main__":
    sys.exit(main())
