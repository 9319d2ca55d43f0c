"""A table as the reader sees it: CSV with every column under its key, Markdown and a standalone HTML page
(shown in the Snakemake report) with chosen columns under readable headers, formatted, and a note."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

import pandas as pd

# column -> (header, format) of the Markdown/HTML view, or (column, column, ...) -> (header, format taking
# each in turn, e.g. "{:.2f} ({:.2f}–{:.2f})"); None: every column under its key
View = dict[str | tuple[str, ...], tuple[str, str]]

HTML_STYLE = (
    "body{font-family:sans-serif;margin:1.5em;color:#1e293b}table{border-collapse:collapse;font-size:14px}"
    "th,td{border:1px solid #cbd5e1;padding:4px 8px}th{background:#f1f5f9}td{text-align:right}"
    "td:first-child{text-align:left}p{max-width:60em;font-size:13px}"
)


def write_table(
    table: pd.DataFrame,
    stem: Path,
    title: str,
    note: str = "",
    view: View | None = None,
    long_form: pd.DataFrame | None = None,
) -> None:
    """stem.csv with every column under its key (the rows of `long_form` where the CSV keeps a longer form
    than the view, e.g. one row per model x bucket); stem.md and stem.html with the `view` columns, and the note."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    (table if long_form is None else long_form).to_csv(stem.with_name(stem.name + ".csv"), index=False)
    stem.with_name(stem.name + ".md").write_text(markdown(table, view, note), encoding="utf-8")
    stem.with_name(stem.name + ".html").write_text(html_page(table, title, view, note), encoding="utf-8")


def html_page(table: pd.DataFrame, title: str, view: View | None = None, note: str = "") -> str:
    """A small standalone HTML page of the table (no scripts, no external resources)."""
    body = displayed(table, view).to_html(index=False, border=0, escape=True)
    return (
        f"<!doctype html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{HTML_STYLE}</style></head>\n<body><h2>{html.escape(title)}</h2>\n{body}\n"
        f"<p>{html.escape(note)}</p></body></html>\n"
    )


def displayed(table: pd.DataFrame, view: View | None = None) -> pd.DataFrame:
    """The view's columns as formatted strings (blank where any value is missing) under their headers; all
    columns if no view."""
    view = view or {c: (c, "{}") for c in table.columns}
    cells = {}
    for key, (header, fmt) in view.items():
        columns = key if isinstance(key, tuple) else (key,)
        rows = zip(*(table[c] for c in columns))
        cells[header] = ["" if any(missing(v) for v in values) else fmt.format(*values) for values in rows]
    return pd.DataFrame(cells)


def markdown(table: pd.DataFrame, view: View | None = None, note: str = "") -> str:
    text = displayed(table, view).to_markdown(index=False, disable_numparse=True)
    return text + "\n" + (f"\n{note}\n" if note else "")


def missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def spread_text(row: Any, column: str = "bleu", fmt: str = "{:.2f}") -> str:
    """A number with what is known of its uncertainty: "93.12"; a mean over seeds "93.12 (91.00–95.20)" (the
    min–max over the runs, `{column}_min/max`); with an interval "... [90.21, 95.80]" (`{column}_ci_lo/hi`)."""
    text = fmt.format(row[column])
    if row.get("n_runs", 1) > 1:
        text += f" ({fmt.format(row[f'{column}_min'])}–{fmt.format(row[f'{column}_max'])})"
    lo, hi = row.get(f"{column}_ci_lo"), row.get(f"{column}_ci_hi")
    if not (missing(lo) or missing(hi)):
        text += f" [{fmt.format(lo)}, {fmt.format(hi)}]"
    return text
