"""One model's verbs: train, average, translate (from its training to its translations)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from attnrepro.config import load_config
from attnrepro.errors import TrainingError


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
    torch.set_flush_denormal(True)  # subnormal floats cost ~20x on x86 (the transducer's gradients): docs/training.md
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
