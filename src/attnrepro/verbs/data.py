"""The data verbs: generate, download, extract, clean, tokenizer, encode (the corpus, up to token ids); Europarl's
download and extract (one job for every day file; one per split)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from attnrepro.config import load_config
from attnrepro.errors import ConfigError


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
    data = cfg.published  # data.wmt or data.europarl
    if data is None or args.split not in data.splits:
        section = "wmt" if cfg.europarl is None else "europarl"
        raise ConfigError(f"{args.config}: no data.{section}.splits.{args.split}")
    raw, out = Path(args.raw_dir), Path(args.out_dir)
    corpora = [RawCorpus(c, raw / f"{c}.src", raw / f"{c}.tgt") for c in data.splits[args.split]]
    filters = data.clean if args.split.startswith("train") else None  # evaluation splits keep every sentence
    outputs = (out / f"{args.split}.{suffix}" for suffix in ("src", "tgt", "manifest.json"))
    record = clean_split(args.split, corpora, *outputs, filters, data.clean.invalid_utf8)
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
    from attnrepro.training.checkpoint import tokenizer_fingerprint

    cfg = load_config(args.config)
    spec, tok_dir = cfg.tokenizer_named(args.name), Path(args.tokenizer_dir)
    src_tok, tgt_tok = load_tokenizer_pair(spec, tok_dir, cfg.languages)
    stamp = tokenizer_fingerprint(tok_dir)  # train refuses the corpus with another tokenizer of the same sizes
    n = encode_corpus(src_tok, tgt_tok, Path(args.src), Path(args.tgt), Path(args.out), args.threads, stamp)
    print(f"{args.out}: {n} sentence pairs")


def _europarl(config: str):
    cfg = load_config(config)
    if cfg.europarl is None:
        raise ConfigError(f"{config}: data.europarl is not configured")
    return cfg.europarl


def cmd_europarl_download(args: argparse.Namespace) -> None:
    from attnrepro.data.europarl import fetch_days, selected_days

    europarl = _europarl(args.config)
    days = [day for split in selected_days(europarl).values() for day in split]
    size = fetch_days(europarl, days, Path(args.out_dir))
    source = europarl.mirror or europarl.url
    print(json.dumps({"days": len(days), "files": 2 * len(days), "bytes": size, "from": source}))


def cmd_europarl_extract(args: argparse.Namespace) -> None:
    from attnrepro.data.europarl import selected_days, split_pairs, write_split

    europarl = _europarl(args.config)
    days = selected_days(europarl)[args.split]
    pairs = split_pairs(europarl, args.split, days, Path(args.download_dir))
    out = Path(args.out_dir)
    counts = write_split(pairs, *(out / f"{args.split}.{suffix}" for suffix in ("src", "tgt", "ids")))
    print(json.dumps({"split": args.split, "first_day": days[0].name, "last_day": days[-1].name, **counts}))
