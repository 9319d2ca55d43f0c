"""What a run costs and where it runs: params (a model's size), estimate (the GPU-hours bill), launch
(a verb on N GPUs, requeued when preempted).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from attnrepro.config import Config, load_config
from attnrepro.verbs import TOKENIZER_FILES


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

    cfg = load_config(args.config, *args.overlay)
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


def cmd_launch(args: argparse.Namespace) -> int:
    from attnrepro.training.launch import main as launch

    verb = args.verb[1:] if args.verb[:1] == ["--"] else args.verb
    return launch(verb, args.gpus, allow_requeue=not args.no_requeue)
