"""Does a run reproduce a published Fig. 2? The reproduction band of every model and length bucket, as a
table anyone can keep (docs/figures/bleu_by_length.csv is the README's), and the check of another run's
means against it.

A band is where the mean of another set of as many seeds falls with 95 % probability
(`aggregate.reproduction_band`), the one-run band where one new run falls; a run reproduces the figure
when nearly every cell's mean falls inside the band that fits it (with 95 % bands, about 1 cell in 20 falls
outside by chance). Every cell of the reference is counted: one the run lacks, or cannot be compared, is
named and fails the check unless the caller allows it.

Every table compare reads holds each model and bucket once (a key given twice is refused naming its lines:
a table of every row twice, the second set at 0, passed as the first), and the run's buckets must be the
reference's width (refused otherwise: no cell of one is a cell of the other). A model whose parameter count
differs from the reference's is another model: its cells are not comparable. Where the two tables record
seeds and commits that differ, the report says so.

Zero-width bands. Where every seed scored the same (three cells of the committed table are 100.0 in all
three seeds) the band is [m, m], and a run one word away from perfect is "outside". The n runs say nothing
about a spread they never showed, so a band is never narrower than the test set can resolve: its half-width
is at least the bucket's `resolution` (`scoring.bleu_resolution`: the BLEU a perfect translation loses
with one word wrong), a property of the references, measured, the same for every model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from attnrepro.errors import DataError

BAND_COLUMNS = {  # column of the band table -> column of bleu_by_length_aggregate
    "base": "base",
    "label": "label",
    "bucket_lo": "bucket_lo",
    "bucket_hi": "bucket_hi",
    "n_sentences": "n_sentences",
    "n_runs": "n_runs",
    "mean": "bleu",
    "band_lo": "band_lo",
    "band_hi": "band_hi",
    "seed_min": "bleu_min",
    "seed_max": "bleu_max",
    "bootstrap_lo": "bleu_ci_lo",
    "bootstrap_hi": "bleu_ci_hi",
    "run_band_lo": "run_band_lo",
    "run_band_hi": "run_band_hi",
    "resolution": "resolution",
    "parameters": "parameters",  # the model's: a band of another model size is no band for this one
    "seeds": "seeds",
    "commit": "commit",  # the code its runs were trained at
}
KEYS = ["base", "bucket_lo", "bucket_hi"]
NUMERIC = ["bucket_lo", "bucket_hi", "n_runs", "mean", "band_lo", "band_hi", "run_band_lo", "run_band_hi",
           "resolution"]  # fmt: skip


def band_table(by_length: pd.DataFrame) -> pd.DataFrame:
    """One row per model and bucket: the mean over its runs, the reproduction band, the one-run band, the
    runs' min and max, the mean of their 95 % bootstrap bounds (the test set's own uncertainty) and the
    bucket's resolution."""
    table = by_length.reindex(columns=list(BAND_COLUMNS.values()))
    table.columns = list(BAND_COLUMNS)
    return table.round({c: 2 for c in ("mean", "band_lo", "band_hi", "seed_min", "seed_max", "bootstrap_lo",
                                       "bootstrap_hi", "run_band_lo", "run_band_hi", "resolution")})  # fmt: skip


def read_band_table(path: Path) -> pd.DataFrame:
    """A band table (`band_table`'s CSV); one that is empty, not a file, not CSV, without its key columns or
    with a non-number where a number belongs is a DataError naming the file."""
    if path.is_dir():
        raise DataError(f"{path}: is a folder, not a band table (a bleu_by_length_band.csv)")
    try:
        table = pd.read_csv(path)
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except pd.errors.EmptyDataError:
        raise DataError(f"{path}: is empty, not a band table") from None
    except (pd.errors.ParserError, UnicodeDecodeError, OSError) as err:
        raise DataError(f"{path}: cannot be read as CSV ({str(err).strip().splitlines()[0]})") from None
    missing = [c for c in (*KEYS, "mean", "band_lo", "band_hi") if c not in table]
    if missing:
        raise DataError(f"{path}: not a table of reproduction bands (no column {', '.join(missing)})")
    for column in [c for c in NUMERIC if c in table]:
        numbers = pd.to_numeric(table[column], errors="coerce")
        bad = table[column].notna() & numbers.isna()
        if bad.any():
            row = int(bad.idxmax())
            raise DataError(f"{path}:{row + 2}: column {column} holds {table[column][row]!r}, not a number")
        table[column] = numbers
    if "n_runs" not in table:
        table["n_runs"] = 1  # a table written before n_runs: one run per model
    repeated = table.duplicated(KEYS, keep=False)
    if repeated.any():
        first = table.loc[repeated.idxmax(), KEYS]
        lines = [str(i + 2) for i in table.index[(table[KEYS] == first).all(axis=1)]]
        where = f"lines {', '.join(lines[:-1])} and {lines[-1]}"
        cell = f"{first['base']}, {int(first['bucket_lo']) + 1}–{int(first['bucket_hi'])} words"
        raise DataError(f"{path}: {cell} is given {len(lines)} times ({where}): a band table holds each model and "
                        "bucket once")  # fmt: skip
    return table


def bucket_widths(table: pd.DataFrame) -> set[int]:
    return set((table["bucket_hi"] - table["bucket_lo"]).dropna().astype(int))


def check_same_buckets(table: pd.DataFrame, table_path: Path, reference: pd.DataFrame, reference_path: Path) -> None:
    """A DataError naming both files when their buckets have no width in common: no cell can be compared."""
    ours, theirs = bucket_widths(table), bucket_widths(reference)
    if ours and theirs and not ours & theirs:
        raise DataError(f"{table_path}: buckets {_words(ours)} wide, but {reference_path} has buckets {_words(theirs)}"
                        f" wide: no cell of one is a cell of the other; score the run with evaluate.bucket_width: "
                        f"{min(theirs)} to compare it")  # fmt: skip


def _words(widths: set[int]) -> str:
    return " or ".join(f"{w} words" for w in sorted(widths))


@dataclass(frozen=True)
class Comparison:
    """Every cell of the reference, checked or not, and the verdict's inputs."""

    cells: pd.DataFrame  # one row per reference cell: status inside | outside | missing | not comparable
    extra: int  # cells of the run that the reference does not have
    run_models: tuple[str, ...] = ()  # the run's base models
    provenance: dict[str, tuple[str, str]] = field(default_factory=dict)  # seeds/commit -> (run's, reference's)

    def count(self, status: str) -> int:
        return int((self.cells["status"] == status).sum())

    def unchecked(self) -> int:
        return self.count("missing") + self.count("not comparable")

    def fraction_inside(self, allow_missing: bool) -> float:
        """Inside over every reference cell; with `allow_missing`, over the cells checked."""
        total = len(self.cells) - (self.unchecked() if allow_missing else 0)
        return self.count("inside") / total if total else 0.0

    def passes(self, min_inside: float, allow_missing: bool) -> bool:
        return (allow_missing or self.unchecked() == 0) and self.fraction_inside(allow_missing) >= min_inside


def _band_for(cell: pd.Series) -> tuple[str, float, float, str]:
    """(which band, lo, hi, why not comparable) for a run's cell of `runs` runs against the reference's."""
    runs, ref_runs = cell["n_runs"], cell["n_runs_reference"]
    ours, theirs = cell.get("parameters", float("nan")), cell.get("parameters_reference", float("nan"))
    if pd.notna(ours) and pd.notna(theirs) and ours != theirs:
        return "", float("nan"), float("nan"), (f"the run's model has {int(ours):,} parameters, the reference's "
                                                f"{int(theirs):,}: another model")  # fmt: skip
    if pd.isna(cell["mean"]):
        return "", float("nan"), float("nan"), "no mean in the run's table"
    if pd.isna(runs) or pd.isna(ref_runs) or ref_runs < 2:
        return "", float("nan"), float("nan"), "the reference has one run here: no band"
    if runs == 1:
        lo, hi = cell.get("run_band_lo", float("nan")), cell.get("run_band_hi", float("nan"))
        why = "the reference has no one-run band (written before it existed)" if pd.isna(lo) or pd.isna(hi) else ""
        return "the one-run band", lo, hi, why
    if runs == ref_runs:
        lo, hi = cell["band_lo"], cell["band_hi"]
        return (
            f"the band of {int(ref_runs)}-run means",
            lo,
            hi,
            "the reference has no band here" * (pd.isna(lo) or pd.isna(hi)),
        )
    return "", float("nan"), float("nan"), (f"a mean of {int(runs)} runs; the reference has bands for one run and "
                                            f"for means of {int(ref_runs)}")  # fmt: skip


def compare_to_reference(ours: pd.DataFrame, reference: pd.DataFrame) -> Comparison:
    """Every cell of the reference: our mean, the band that fits our number of runs (floored to the bucket's
    resolution), whether ours is inside it and by how much it misses (0 inside), worst misses first; cells
    the run lacks are `missing`, those without a fitting band `not comparable`, with the reason."""
    ref_columns = [*KEYS, "label", "mean", "band_lo", "band_hi", "n_runs"]
    ref_columns += [c for c in ("run_band_lo", "run_band_hi", "resolution", "parameters") if c in reference]
    renamed = {"mean": "mean_reference", "n_runs": "n_runs_reference", "parameters": "parameters_reference"}
    cells = reference[ref_columns].rename(columns=renamed)
    our_columns = [*KEYS, "mean", "n_runs", *(["parameters"] if "parameters" in ours else [])]
    cells = cells.merge(ours[our_columns], on=KEYS, how="left", indicator=True)
    bands = [_band_for(cell) for _, cell in cells.iterrows()]
    cells["band"] = [b[0] for b in bands]
    lo, hi = pd.Series([b[1] for b in bands], dtype=float), pd.Series([b[2] for b in bands], dtype=float)
    cells["why"] = [b[3] for b in bands]
    resolution = cells["resolution"] if "resolution" in cells else pd.Series(0.0, index=cells.index)
    resolution = resolution.fillna(0.0)
    floor_lo = (cells["mean_reference"] - resolution).clip(lower=0)
    floor_hi = (cells["mean_reference"] + resolution).clip(upper=100)
    cells["floored"] = (floor_lo < lo) | (floor_hi > hi)
    cells["lo"], cells["hi"] = lo.where(lo <= floor_lo, floor_lo), hi.where(hi >= floor_hi, floor_hi)
    below, above = cells["lo"] - cells["mean"], cells["mean"] - cells["hi"]
    cells["miss"] = pd.concat([below, above], axis=1).max(axis=1).clip(lower=0)
    status = pd.Series("outside", index=cells.index).where(cells["miss"] > 0, "inside")
    status = status.where(cells["why"] == "", "not comparable")
    cells["status"] = status.where(cells["_merge"] == "both", "missing")
    cells.loc[cells["status"].isin(["missing", "not comparable"]), ["miss", "floored"]] = [float("nan"), False]
    extra = len(ours.merge(reference[KEYS], on=KEYS, how="left", indicator=True).query("_merge == 'left_only'"))
    cells = cells.drop(columns="_merge").sort_values("miss", ascending=False, kind="stable", na_position="last")
    provenance = {}
    for column in ("seeds", "commit"):
        run, ref = _joined(ours, column), _joined(reference, column)
        if run != ref:
            provenance[column] = (run, ref)
    return Comparison(cells.reset_index(drop=True), extra, tuple(dict.fromkeys(ours["base"])), provenance)


def _joined(table: pd.DataFrame, column: str) -> str:
    """A table's distinct values of `column` (each row's may list several, comma-separated), or that it has none."""
    if column not in table or table[column].isna().all():
        return "not recorded"
    values = [v.strip() for text in table[column].dropna().astype(str) for v in text.split(",")]
    return ", ".join(dict.fromkeys(values))


def _cell_name(c: pd.Series) -> str:
    return f"{c['label']} ({c['base']}), {int(c['bucket_lo']) + 1}–{int(c['bucket_hi'])} words"


def comparison_report(result: Comparison, min_inside: float, allow_missing: bool = False, worst: int = 10) -> str:
    """What `attnrepro compare` prints: the cells inside the band that fits the run, counted against every
    cell of the reference; the bands used; the cells outside, missing or not comparable, by name."""
    cells, total = result.cells, len(result.cells)
    inside, unchecked = result.count("inside"), result.unchecked()
    over = f"{total - unchecked} cells checked" if allow_missing else f"{total} cells of the reference"
    used = " and ".join(sorted(b for b in cells["band"].unique() if b))
    needed = f"(needed: {100 * min_inside:.0f} %)"
    if total - unchecked == 0:  # nothing compared: say why, not "0 of 0" or "inside no band"
        lines = [f"no cell compared: {_why_none(result)}; the check fails {needed}"]
    else:
        lines = [f"{inside} of {over} ({100 * result.fraction_inside(allow_missing):.1f} %) have their mean inside "
                 f"{used} {needed}"]  # fmt: skip
    if unchecked:
        verdict = "not counted (--allow-missing)" if allow_missing else "counted as not inside: the check fails"
        lines.append(f"{unchecked} of the reference's {total} cells not checked, {verdict}:")
    for status in ("missing", "not comparable"):
        named = cells[cells["status"] == status]
        for _, c in named.head(worst).iterrows():
            why = "not in the run's table" if status == "missing" else c["why"]
            lines.append(f"  {status}: {_cell_name(c)}: {why}")
        if len(named) > worst:
            lines.append(f"  ... and {len(named) - worst} more {status}")
    outside = cells[cells["status"] == "outside"]
    for _, c in outside.head(worst).iterrows():
        lines.append(f"  outside: {_cell_name(c)}: {c['mean']:.1f}, band [{c['lo']:.1f}, {c['hi']:.1f}] "
                     f"(reference mean {c['mean_reference']:.1f})")  # fmt: skip
    if len(outside) > worst:
        lines.append(f"  ... and {len(outside) - worst} more outside")
    floored = int(cells["floored"].sum())
    if floored:
        lines.append(f"{floored} band(s) narrower than the test set's resolution (one wrong word of a perfect "
                     "translation) widened to it")  # fmt: skip
    if result.extra:
        lines.append(f"{result.extra} cell(s) of the run are not in the reference (not counted)")
    for column, (run, ref) in result.provenance.items():
        lines.append(f"{column}: the run's {run}; the reference's {ref}")
    return "\n".join(lines)


def _why_none(result: Comparison) -> str:
    """Why no cell of the reference was compared, in a clause."""
    cells, total = result.cells, len(result.cells)
    if total == 0:
        return "the reference has no cell"
    if result.count("missing") == total:
        theirs = ", ".join(dict.fromkeys(cells["base"]))
        ours = ", ".join(result.run_models) or "none"
        return (
            f"the run's table has none of the reference's {total} cells (its models: {ours}; the reference's: {theirs})"
        )
    reasons = cells.loc[cells["status"] == "not comparable", "why"]
    more = ", …" if reasons.nunique() > 1 else ""
    return f"none of the reference's {total} cells is comparable ({reasons.iloc[0]}{more})"
