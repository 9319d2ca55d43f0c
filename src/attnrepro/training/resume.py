"""Resume: `{out}/resume/` is not a declared Snakemake output, so a failed job's cleanup never deletes it.

`last.pt` holds model, optimizer and the `TrainState` (step, data position, tokens seen, the log window,
every rank's RNG state); `train_log.csv` the log rows up to that step. Rerunning the same command
continues bit-identically. `last.pt` also holds the fingerprint of its run (`checkpoint.run_fingerprint`):
a rerun whose model, train settings, data, vocabulary or batches per update differ, or whose max_steps is
below the saved step, sets `resume/` aside as `resume.stale-<time>/` and trains from step 0, saying which
keys differed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel

from attnrepro.errors import DataError
from attnrepro.training.checkpoint import (
    RESUME_KEYS,
    fingerprint_differences,
    load_checkpoint,
    set_aside,
    set_rng_state,
)
from attnrepro.training.distributed import Ranks, barrier, sum_over_ranks
from attnrepro.training.state import TrainState


def saved_state(
    path: Path, fingerprint: dict, max_steps: int, name: str, ranks: Ranks, device: torch.device
) -> dict[str, Any] | None:
    """`path` (resume/last.pt) if this run wrote it (same fingerprint, not past max_steps), else None: rank 0
    decides, and sets another run's state aside (never deletes it) with a line saying why."""
    main = ranks.is_main
    saved, differences = None, []
    if main and path.exists():
        saved = load_checkpoint(path, RESUME_KEYS)
        differences = fingerprint_differences(saved.get("fingerprint"), fingerprint)
        if saved["step"] > max_steps:
            differences.append(f"train.max_steps: {max_steps} is below its step {saved['step']}")
    (stale,) = sum_over_ranks([float(bool(differences))], ranks, device)
    if stale and main:
        aside = set_aside(path.parent)
        print(f"{name}: {path} is another run's state ({'; '.join(differences)}); "
              f"moved to {aside}, training from step 0", flush=True)  # fmt: skip
    barrier(ranks)  # no rank looks for last.pt before rank 0 has set it aside
    if stale or not path.exists():
        return None
    return saved if main else load_checkpoint(path, RESUME_KEYS)


def restore(
    saved: dict[str, Any],
    path: Path,
    name: str,
    trained: tuple[nn.Module, torch.optim.Optimizer, AveragedModel | None],
    ranks: Ranks,
) -> TrainState:
    """The `TrainState` of `saved` (read from `path`), with the (model, optimizer, moving average) `trained`
    and this rank's generators restored from it."""
    model, optimizer, ema = trained
    main = ranks.is_main
    try:  # the fingerprint matched: only a change of the model's code can make this fail
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        if ema is not None:
            ema.load_state_dict(saved["ema"])
    except (RuntimeError, ValueError, KeyError) as err:
        raise DataError(f"{path}: does not fit model {name} ({err}); delete {path.parent} to start over"
                        ) from err  # fmt: skip
    state = TrainState.from_checkpoint(saved)
    if len(state.rngs) == ranks.world_size:
        set_rng_state(state.rngs[ranks.rank])
    elif main:
        print(f"{path}: saved by {len(state.rngs)} rank(s), now {ranks.world_size}: not bit-exact")
    if main:
        print(f"resuming {name} from step {state.step} (epoch {state.epoch}, batch {state.position})",
              flush=True)  # fmt: skip
    return state
