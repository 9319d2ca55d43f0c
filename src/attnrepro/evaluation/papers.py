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


@dataclass(frozen=True)
class Published:
    """A published Multi30k system beside one of our models: its score as text ("41.02", "≈ 36.5–38.0") and
    whose it is (`source`, and `short` for table cells)."""

    text: str
    source: str
    short: str


def multi30k_pair(cfg: Config, papers: dict[str, Any] | None = None) -> str | None:
    """The language pair ("en_de" or "en_fr") of a run of a Multi30k dataset that paper_numbers.yaml's
    multi30k_published names; None on every other dataset (the embedded corpus, WMT'14)."""
    papers = paper_numbers() if papers is None else papers
    pairs = {dataset: pair for pair, dataset in papers["multi30k_published"]["datasets"].items()}
    return pairs.get(cfg.dataset)


def published_multi30k(cfg: Config, model: ModelConfig, papers: dict[str, Any] | None = None) -> Published | None:
    """The published system of `model`'s kind on this Multi30k pair (lowercased tokenized BLEU on
    test_2016_flickr); None off Multi30k, for a model no row lists, or where docs/papers.md has no number."""
    papers = paper_numbers() if papers is None else papers
    pair = multi30k_pair(cfg, papers)
    row = paper_row(model, "multi30k_published", papers=papers) if pair else None
    value = paper_value(row, pair) if pair else None
    if value is None:
        return None
    if isinstance(value, list):
        text = f"{'≈ ' if row.values.get('approximate') else ''}{value[0]:.1f}–{value[1]:.1f}"
    else:
        text = f"{value:.2f}"
    return Published(text, row.values["source"], row.values["short"])


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
