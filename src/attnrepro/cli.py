"""`attnrepro` console script: one sub-command per workflow rule, plus `params`.

Every verb reads the validated configuration through `attnrepro.config.load_config`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from attnrepro.config import Config, load_config
from attnrepro.errors import AttnreproError, ConfigError, DataError, TrainingError


def cmd_generate(args: argparse.Namespace) -> None:
    from attnrepro.data.synthetic import write_splits

    cfg = load_config(args.config)
    if cfg.synthetic is None:
        raise ConfigError(f"{args.config}: data.synthetic is not configured")
    counts = write_splits(cfg.synthetic, Path(args.out_dir))
    print(json.dumps(counts))


def cmd_download(args: argparse.Namespace) -> None:
    from attnrepro.data.fetch import fetch

    cfg = load_config(args.config)
    if cfg.wmt is None or args.file not in cfg.wmt.files:
        raise ConfigError(f"{args.config}: no data.wmt.files.{args.file}")
    wmt = cfg.wmt
    mirror = Path(wmt.mirror) if wmt.mirror is not None else None
    result = fetch(args.file, wmt.files[args.file], Path(args.out), Path(args.lock), wmt.retries, wmt.timeout_s, mirror)
    print(json.dumps({"file": args.file, **result}))


def cmd_extract(args: argparse.Namespace) -> None:
    from attnrepro.data.wmt import extract_corpus

    cfg = load_config(args.config)
    if cfg.wmt is None or args.corpus not in cfg.wmt.corpora:
        raise ConfigError(f"{args.config}: no data.wmt.corpora.{args.corpus}")
    spec = cfg.wmt.corpora[args.corpus]
    inputs = Path(args.src_input), Path(args.tgt_input)
    counts = extract_corpus(*inputs, args.corpus, spec, Path(args.src), Path(args.tgt))
    print(json.dumps({"corpus": args.corpus, **counts}))


def cmd_clean(args: argparse.Namespace) -> None:
    from attnrepro.data.clean import RawCorpus, clean_split

    cfg = load_config(args.config)
    if cfg.wmt is None or args.split not in cfg.wmt.splits:
        raise ConfigError(f"{args.config}: no data.wmt.splits.{args.split}")
    raw, out = Path(args.raw_dir), Path(args.out_dir)
    corpora = [RawCorpus(c, raw / f"{c}.src", raw / f"{c}.tgt") for c in cfg.wmt.splits[args.split]]
    filters = cfg.wmt.clean if args.split.startswith("train") else None  # evaluation splits keep every sentence
    outputs = (out / f"{args.split}.{suffix}" for suffix in ("src", "tgt", "manifest.json"))
    record = clean_split(args.split, corpora, *outputs, filters, cfg.wmt.clean.invalid_utf8)
    print(json.dumps(record))


def cmd_tokenizer(args: argparse.Namespace) -> None:
    from attnrepro.data.tokenize import load_tokenizer_pair, train_tokenizers

    cfg = load_config(args.config)
    spec = cfg.tokenizer_named(args.name)
    out_dir = Path(args.out_dir)
    train_tokenizers(spec, Path(args.src), Path(args.tgt), out_dir, cfg.languages, args.threads)
    for side, tokenizer in zip(("src", "tgt"), load_tokenizer_pair(spec, out_dir, cfg.languages)):
        print(f"{side}: {len(tokenizer)} entries")


def cmd_encode(args: argparse.Namespace) -> None:
    from attnrepro.data.tokenize import encode_corpus, load_tokenizer_pair

    cfg = load_config(args.config)
    spec = cfg.tokenizer_named(args.name)
    src_tok, tgt_tok = load_tokenizer_pair(spec, Path(args.tokenizer_dir), cfg.languages)
    n = encode_corpus(src_tok, tgt_tok, Path(args.src), Path(args.tgt), Path(args.out), args.threads)
    print(f"{args.out}: {n} sentence pairs")


def cmd_train(args: argparse.Namespace) -> None:
    import os

    from attnrepro.data.batching import Corpus
    from attnrepro.data.tokenize import load_tokenizer_pair
    from attnrepro.training.checkpoint import tokenizer_fingerprint
    from attnrepro.training.distributed import from_environment
    from attnrepro.training.launch import PREEMPTED_EXIT_CODE
    from attnrepro.training.loop import Preempted, train
    from attnrepro.training.validation import ValidBleu

    cfg = load_config(args.config)
    tok_dir = Path(args.tokenizer_dir)
    src_tok, tgt_tok = load_tokenizer_pair(cfg.tokenizer_of(args.model), tok_dir, cfg.languages)
    mc = cfg.model(args.model)
    search = cfg.search_of(args.model)
    valid_bleu = None
    if mc.train.valid_bleu:  # searches on the training device, in bf16 where the model trains in bf16
        valid_bleu = ValidBleu(Corpus.load(Path(args.valid)), tgt_tok, search, mc.train.precision)
    try:
        data, vocab = (Path(args.train), Path(args.valid)), (len(src_tok), len(tgt_tok))
        ranks = from_environment(os.environ)  # torchrun's or srun's ranks; one process otherwise
        out_dir, tokenizer = Path(args.out_dir), tokenizer_fingerprint(tok_dir)
        train(mc, *data, *vocab, out_dir, args.threads, not args.no_progress, ranks, valid_bleu, tokenizer)
    except Preempted as stop:  # SIGTERM/SIGUSR1/SIGINT: checkpoint written; the same command resumes
        print(f"attnrepro train: {stop}", file=sys.stderr)
        raise SystemExit(PREEMPTED_EXIT_CODE) from None
    except OSError as err:  # a full disk, a read-only folder: what was written before stays, and resumes
        where = err.filename or args.out_dir
        raise TrainingError(f"{where}: {err.strerror or err}; the checkpoints written before are kept: free space "
                            "or make the folder writable and rerun the same command to resume") from None  # fmt: skip


def cmd_average(args: argparse.Namespace) -> None:
    from attnrepro.training.checkpoint import check_model, load_checkpoint, write_average

    cfg = load_config(args.config)
    check_model(load_checkpoint(Path(args.checkpoint)), Path(args.checkpoint), cfg.model(args.model))
    last = cfg.model(args.model).train.average_last
    steps = write_average(Path(args.checkpoint), last, Path(args.out))
    print(f"{args.out}: mean of the checkpoints of steps {', '.join(map(str, steps))}")


def cmd_translate(args: argparse.Namespace) -> None:
    import torch

    from attnrepro.data.tokenize import load_tokenizer_pair
    from attnrepro.decoding.attention_file import save_attention
    from attnrepro.decoding.search import search_device, translate_lines
    from attnrepro.evaluation.no_unk import write_no_unk_translations
    from attnrepro.evaluation.scoring import read_test_split
    from attnrepro.training.checkpoint import check_model, check_trained_with
    from attnrepro.training.loop import build_from_checkpoint, load_checkpoint

    cfg = load_config(args.config)
    search = cfg.search_of(args.model) if args.model else cfg.search
    device = search_device(search.device)  # before any loading: search.device cuda without a GPU fails at once
    lines, references = read_test_split(Path(args.src), Path(args.ref))
    torch.set_num_threads(args.threads)
    tok_dir = Path(args.tokenizer_dir)
    spec = cfg.tokenizer_of(args.model) if args.model else cfg.tokenizer
    src_tok, tgt_tok = load_tokenizer_pair(spec, tok_dir, cfg.languages)
    ckpt, checkpoint = load_checkpoint(Path(args.checkpoint)), Path(args.checkpoint)
    if args.model:
        check_model(ckpt, checkpoint, cfg.model(args.model))
    check_trained_with(ckpt, checkpoint, tok_dir, (len(src_tok), len(tgt_tok)))
    model = build_from_checkpoint(ckpt)
    precision = cfg.model(args.model).train.precision if args.model else "fp32"  # bf16 autocast as it trained
    hypotheses = translate_lines(model, src_tok, tgt_tok, lines, search, device=device, precision=precision)
    out = Path(args.out)
    for path in (out, Path(args.attention), Path(args.out_no_unk)):  # as every other verb, make their folders
        path.parent.mkdir(parents=True, exist_ok=True)
    # decode() gives plain text: sentencepiece decodes, the Moses word path is Moses-detokenized
    texts = [tgt_tok.decode(h.tokens) for h in hypotheses]
    out.write_text("".join(text + "\n" for text in texts), encoding="utf-8")
    save_attention([h.attention for h in hypotheses], Path(args.attention))
    print(f"{out}: {len(hypotheses)} translations ({device})")
    no_unk = (lines, references, texts) if spec.kind == "word" else None  # subwords have no No UNK subset
    print(
        write_no_unk_translations(Path(args.out_no_unk), model, (src_tok, tgt_tok), search, no_unk, device, precision)
    )


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
    summary, rows = score_files(*paths, cfg.evaluate, cfg.languages, length_unit=unit, no_unk=no_unk)
    summary["model"] = args.model
    summary["label"] = cfg.model(args.model).label
    for path in (Path(args.json), Path(args.csv)):  # as every other verb, make their folders
        path.parent.mkdir(parents=True, exist_ok=True)
    write_scores(summary, rows, Path(args.json), Path(args.csv))
    print(json.dumps(summary))


def cmd_tables(args: argparse.Namespace) -> None:
    from attnrepro.evaluation.tables import write_tables

    cfg = load_config(args.config)
    write_tables(cfg, Path(args.results), Path(args.out_dir), Path(args.captions))


def cmd_figure_length(args: argparse.Namespace) -> None:
    from attnrepro.evaluation.figures import write_bleu_by_length_figure

    cfg = load_config(args.config)
    write_bleu_by_length_figure(cfg, Path(args.results), Path(args.figure), Path(args.caption))


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
    write_training_curves(cfg, Path(args.results), Path(args.figure), Path(args.caption))


def cmd_params(args: argparse.Namespace) -> None:
    from attnrepro.models import parameter_count

    cfg = load_config(args.config)
    mc = cfg.model(args.model, any_seed=True)  # a model trained once per seed: every run has its size
    (src_vocab, tgt_vocab), source = _params_vocab(cfg, mc.name, args.tokenizer_dir)
    src_vocab, tgt_vocab = args.src_vocab or src_vocab, args.tgt_vocab or tgt_vocab
    if args.src_vocab and args.tgt_vocab:
        source = "as given"
    print(f"{args.model}: {mc.arch}, source vocabulary {src_vocab}, target vocabulary {tgt_vocab} ({source})")
    print(parameter_count(mc.arch, src_vocab, tgt_vocab, mc.params))


def _params_vocab(cfg: Config, model: str, tokenizer_dir: str | None) -> tuple[tuple[int, int], str]:
    """(source, target) vocabulary sizes as training will see them: the trained tokenizer's when it exists
    (what the training log counts), else the config's nominal sizes; and a phrase saying which."""
    from attnrepro.training.estimate import vocab_sizes

    name = cfg.model(model).tokenizer
    folder = Path(tokenizer_dir or f"results/{cfg.dataset}/tokenizer/{name}")
    if all((folder / file).is_file() for file in TOKENIZER_FILES):
        from attnrepro.data.tokenize import load_tokenizer_pair

        src_tok, tgt_tok = load_tokenizer_pair(cfg.tokenizer_named(name), folder, cfg.languages)
        return (len(src_tok), len(tgt_tok)), f"the trained tokenizer in {folder}"
    nominal = f"nominal, from tokenizers.{name}: no trained tokenizer in {folder}; training counts the trained one's"
    return vocab_sizes(cfg, model), nominal


def cmd_estimate(args: argparse.Namespace) -> None:
    """A query: prints the bill; writes a file only when --out names one."""
    from attnrepro.training.estimate import budget_notes, estimate, format_budget, write_budget

    cfg = load_config(args.config)
    rows = [estimate(cfg, name) for name in cfg.models]
    measured = sum(r.priced_from.startswith("measured") for r in rows)
    print(f"{cfg.dataset}: GPU-hours of {measured} of {len(rows)} models from their measured tokens/s on one GPU "
          f"(resources.measured), the others from C = 6 N D at the TFLOP/s shown (a guess)")  # fmt: skip
    print(format_budget(rows))
    for line in budget_notes(rows):
        print(line)
    if any(r.jobs > 1 for r in rows):
        print("A run longer than its time limit is signalled before the limit, checkpoints, requeues and resumes "
              "(docs/cluster.md)")  # fmt: skip
    if args.out:
        write_budget(rows, Path(args.out))
        print(f"written to {args.out}")


def cmd_compare(args: argparse.Namespace) -> int:
    from attnrepro.evaluation.reproduce import compare_to_reference, comparison_report, read_band_table

    if not 0 <= args.min_inside <= 1:  # also NaN
        raise DataError(f"--min-inside {args.min_inside}: not a fraction in [0, 1] (0.9: 90 % of the cells)")
    result = compare_to_reference(read_band_table(Path(args.table)), read_band_table(Path(args.reference)))
    print(comparison_report(result, args.min_inside, args.allow_missing))
    return 0 if result.passes(args.min_inside, args.allow_missing) else 1


def cmd_launch(args: argparse.Namespace) -> int:
    from attnrepro.training.launch import main as launch

    verb = args.verb[1:] if args.verb[:1] == ["--"] else args.verb
    return launch(verb, args.gpus, allow_requeue=not args.no_requeue)


INTERRUPTED_EXIT_CODE = 128 + signal.SIGINT  # what a shell reports for a command that Ctrl-C stopped
BROKEN_PIPE_EXIT_CODE = 128 + signal.SIGPIPE  # ... and for one whose reader closed the pipe (`yes | head -1`)
TOKENIZER_FILES = ("src.model", "tgt.model")  # what load_tokenizer_pair reads from a --tokenizer-dir


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
