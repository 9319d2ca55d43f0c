"""The papers' numbers that our tables and figures put beside ours, looked up in `paper_numbers.yaml`
(copied from docs/papers.md): a configured model finds its paper row by label or config name."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from attnrepro.config import Config, ModelConfig

PAPER_NUMBERS = Path(__file__).with_name("paper_numbers.yaml")


@cache
def paper_numbers(path: Path = PAPER_NUMBERS) -> dict[str, Any]:
    """The papers' tables (see paper_numbers.yaml); nothing here that docs/papers.md lacks."""
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


def paper_value(row: PaperRow | None, key: str) -> Any:
    return None if row is None else row.values.get(key)


def short_source(source: str) -> str:
    """'Bahdanau, Cho, Bengio 2014, Table 1' -> 'Bahdanau 2014, Table 1'."""
    authors, _, rest = source.partition(" 20")
    return f"{authors.split(',')[0].split(' ')[0]} 20{rest}"


def is_full_run_of(cfg: Config, dataset: str) -> bool:
    """A run on the paper's own data (a WMT config of that dataset), not the synthetic stand-in."""
    return cfg.wmt is not None and cfg.dataset == dataset


def fig2_paper_points(cfg: Config, papers: dict[str, Any] | None = None) -> dict[str, list[list[float]]]:
    """Bahdanau Fig. 2's points from paper_numbers.yaml ("paper: <row>" -> [[length, BLEU], ...]), only on a
    full run of the paper's dataset; empty otherwise, and empty while docs/papers.md gives no per-length numbers."""
    papers = paper_numbers() if papers is None else papers
    fig2 = papers["bahdanau2014_fig2"]
    if not is_full_run_of(cfg, fig2["dataset"]):
        return {}
    return {f"paper: {label}": [list(p) for p in points] for label, points in (fig2["points"] or {}).items()}
