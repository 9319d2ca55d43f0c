"""Joey NMT 2.3.0's side of benchmarks/vs_joeynmt.py; runs inside .venv-joeynmt (never imports attnrepro).

Trains with Joey's own `joeynmt.training.train` (its TrainManager loop, unchanged) and reads
the throughput Joey itself logs every `logging_freq` updates ("Tokens per Sec": real target
tokens, </s> included, over the wall time since the previous log line, validation excluded).
Then loads the last checkpoint as `joeynmt test` does and times `joeynmt.prediction.predict`
on the test set (beam search, the config's `testing:` section) `--repeats` times after one
warm-up batch of validation sentences. Prints one JSON object on its last line of stdout.

`--patience N` (vs_joeynmt.py --plateau): Joey NMT 2.3 stops only at its update cap or when a plateau
*schedule* has cut the learning rate below `learning_rate_min`; this worker stops it after N validations
in a row without a relative gain of `--min-delta` in the validation loss Joey reports (ln of its
perplexity), attnrepro's `train.patience` rule (attnrepro.training.state.EarlyStopping, restated here:
this process never imports attnrepro). `--checkpoint best` decodes with Joey's own best.ckpt (the lowest
validation loss, its `early_stopping_metric`).

    .venv-joeynmt/bin/python benchmarks/joeynmt_worker.py CONFIG --threads 2 --repeats 3 --hyp OUT
"""

from __future__ import annotations

import argparse
import json
import math
import re
import resource
import time
from dataclasses import dataclass
from pathlib import Path

import torch

TOKENS_PER_SEC = re.compile(r"Step:\s+(\d+),.*Tokens per Sec:\s+([\d.]+)")
PPL = re.compile(r"\bppl:\s+([\d.]+)")  # a line of Joey's validations.txt


@dataclass
class Plateau:
    """attnrepro's early-stopping rule (attnrepro.training.state.EarlyStopping, which this venv lacks): a
    validation improves when its perplexity is at least `min_delta` (relative) below that of the last
    validation that improved, i.e. its loss -ln(1 - min_delta) nats below; training stops after `patience`
    validations in a row without one (0: never)."""

    patience: int
    min_delta: float
    reference: float = math.inf
    without_improvement: int = 0
    validations: int = 0
    stopped_at: int | None = None  # the update after whose validation it stopped

    def record(self, loss: float, step: int) -> bool:
        """Count one validation; True when training should stop here."""
        self.validations += 1
        if loss <= self.reference + math.log1p(-self.min_delta):
            self.reference, self.without_improvement = loss, 0
        else:
            self.without_improvement += 1
        if 0 < self.patience <= self.without_improvement and self.stopped_at is None:
            self.stopped_at = step
        return self.stopped_at is not None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--hyp", required=True, help="write the test-set hypotheses here")
    ap.add_argument("--patience", type=int, default=0, help="stop after N validations without a gain (0: never)")
    ap.add_argument("--min-delta", type=float, default=0.01, help="the relative gain in validation loss that counts")
    ap.add_argument("--checkpoint", choices=("latest", "best"), default="latest", help="the weights that decode")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    import joeynmt
    from joeynmt.config import load_config, parse_global_args
    from joeynmt.helpers import make_model_dir
    from joeynmt.helpers_for_ddp import get_logger
    from joeynmt.prediction import predict, prepare
    from joeynmt.training import TrainManager, train

    tgt_tokens: list[int] = []  # real target tokens of every batch Joey trains on
    train_step = TrainManager._train_step

    def counting_train_step(self, batch):
        tgt_tokens.append(int(batch.ntokens))
        return train_step(self, batch)

    TrainManager._train_step = counting_train_step

    plateau, best = Plateau(args.patience, args.min_delta), {}
    validate = TrainManager._validate

    def validate_to_plateau(self, valid_data):
        validate(self, valid_data)  # Joey's own: its scores, best.ckpt, validations.txt
        best.update(step=self.stats.best_ckpt_iter)
        ppl = PPL.search((self.model_dir / "validations.txt").read_text().splitlines()[-1])
        if plateau.record(math.log(float(ppl.group(1))), self.stats.steps):
            self.stats.is_max_update = True  # Joey's own way out of its loops, at the end of this update

    TrainManager._validate = validate_to_plateau

    cfg = load_config(Path(args.config))
    model_dir = Path(cfg["model_dir"])
    make_model_dir(model_dir, overwrite=True)
    get_logger("", log_file=str(model_dir / "train.log"))
    start = time.perf_counter()
    train(rank=0, world_size=None, cfg=cfg, skip_test=True)
    train_wall_s = time.perf_counter() - start
    windows = [
        (int(m.group(1)), float(m.group(2)))
        for m in map(TOKENS_PER_SEC.search, (model_dir / "train.log").read_text().splitlines())
        if m
    ]

    cfg = load_config(Path(args.config))
    cfg["testing"]["load_model"] = str(model_dir / f"{args.checkpoint}.ckpt")
    test_args = parse_global_args(cfg, rank=0, mode="test")
    model, _, dev_data, test_data = prepare(test_args, rank=0, mode="test")
    n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)

    def decode(data) -> list[str]:
        _, _, hypotheses, *_ = predict(
            model=model,
            data=data,
            device=test_args.device,
            n_gpu=0,
            compute_loss=False,
            normalization=test_args.train.normalization,
            num_workers=0,
            args=test_args.test,
            autocast=test_args.autocast,
        )
        return hypotheses

    dev_data.reset_indices(random_subset=test_args.test.batch_size)  # Joey subsamples only train/dev
    decode(dev_data)  # warm-up: one batch of validation sentences
    test_data.reset_indices(random_subset=-1)
    seconds = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        hypotheses = decode(test_data)
        seconds.append(time.perf_counter() - start)
    Path(args.hyp).write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
    result = {
        "version": joeynmt.__version__ if hasattr(joeynmt, "__version__") else "2.3.0",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "params": n_params,
        "train_windows": windows,  # (update, tokens/s of the window ending there)
        "train_wall_s": train_wall_s,
        "updates": len(tgt_tokens),
        "validations": plateau.validations,
        "best_step": best.get("step") if args.checkpoint == "best" else len(tgt_tokens),  # the weights decoded
        "stop_reason": "plateau" if plateau.stopped_at is not None else "max_steps",
        "tgt_tokens_per_update": sum(tgt_tokens) / max(len(tgt_tokens), 1),
        "decode_seconds": seconds,
        "n_test": len(hypotheses),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
