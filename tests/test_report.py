"""Tables: the papers' numbers beside ours (and only the papers' numbers), FLOPs estimates, captions."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pandas as pd
import pytest
import torch
import yaml

from attnrepro.config import WmtDataConfig, from_dict, load_config
from attnrepro.errors import DataError
from attnrepro.evaluation import captions
from attnrepro.evaluation.figures import write_bleu_by_length_figure
from attnrepro.evaluation.papers import fig2_paper_points, paper_numbers, paper_row
from attnrepro.evaluation.render import displayed, markdown
from attnrepro.evaluation.runs import RunCheckpoint, read_checkpoint, training_length
from attnrepro.evaluation.tables import (
    TABLE1_CI,
    TABLE1_LC_TOK_CI,
    bleu_by_length_wide,
    table1,
    table1_view,
    table2,
    table2_view,
    table_notes,
    training_flops,
    write_tables,
)
from attnrepro.models import count_parameters
from attnrepro.verbs.evaluation import training_logs

from conftest import REPO, TINY_PARAMS, tiny_model

PAPERS_MD = REPO / "docs" / "papers.md"  # the papers' setups and numbers, the source of paper_numbers.yaml


@pytest.fixture(scope="module")
def embedded():
    """The embedded default with one run per model (its `seeds` left out): each model under its own name."""
    raw = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    del raw["seeds"]
    return from_dict(raw)


def scores_for(cfg, bleu: float = 20.0, no_unk: bool = True) -> dict:
    """bleu.json contents as `attnrepro score` writes them, one per model (BLEU rising with the model index)."""
    out = {}
    for i, name in enumerate(cfg.models):
        subset = {"applies": True, "n_sentences": 700, "bleu": bleu + i + 0.5, "bleu_tokenized": bleu + i + 0.25}
        out[name] = {
            "bleu": bleu + i,
            "bleu_tokenized": bleu + i + 0.1,
            "n_sentences": 800,
            "no_unk": subset if no_unk else {"applies": False},
        }
    return out


def test_paper_numbers_are_the_papers():
    papers = paper_numbers()
    t1 = papers["bahdanau2014_table1"]["rows"]
    assert (t1["RNNencdec-30"]["all"], t1["RNNencdec-30"]["no_unk"]) == (13.93, 24.19)
    assert (t1["RNNsearch-50"]["all"], t1["RNNsearch-50"]["no_unk"]) == (26.75, 34.16)
    assert (t1["Moses (phrase-based SMT)"]["all"], t1["Moses (phrase-based SMT)"]["no_unk"]) == (33.30, 35.63)
    t2 = papers["vaswani2017_table2"]["rows"]
    assert (t2["Transformer base"]["en_de"], t2["Transformer base"]["en_fr"], t2["Transformer base"]["flops"]) == (
        27.3, 38.1, 3.3e18,
    )  # fmt: skip
    assert (t2["Transformer big"]["en_de"], t2["Transformer big"]["en_fr"], t2["Transformer big"]["flops"]) == (
        28.4, 41.8, 2.3e19,
    )  # fmt: skip
    assert papers["bahdanau2014_fig2"]["points"] == {}  # docs/papers.md describes Fig. 2 in words only
    for table in ("bahdanau2014_table1", "sutskever2014_table1", "vaswani2017_table2"):
        for name, row in papers[table]["rows"].items():
            numbers = {k: v for k, v in row.items() if k != "labels"}
            assert numbers and all(isinstance(v, float) for v in numbers.values()), (table, name, numbers)


def numbers_in(text: str) -> set[float]:
    """Decimals in `text`, with powers of ten written 3.3e18, 3.3 × 10^18, 3.3·10^18 or 3.3 x 10<sup>18</sup>."""
    found = {float(x) for x in re.findall(r"\d+\.\d+", text)}
    power = r"(\d+\.\d+)\s*(?:e\+?|[×x·]\s*10\s*(?:\^|<sup>)\s*)(\d+)"
    return found | {float(f"{m}e{e}") for m, e in re.findall(power, text)}


def test_numbers_in_reads_the_ways_a_paper_number_is_written():
    assert numbers_in("| 27.3 | 3.3e18 | 2.3 × 10^19 | 1.0·10^20 | 4.5 x 10<sup>21</sup> |") == {
        27.3, 3.3, 2.3, 1.0, 4.5, 3.3e18, 2.3e19, 1.0e20, 4.5e21,
    }  # fmt: skip


def test_every_paper_number_appears_in_papers_md():
    found = numbers_in(PAPERS_MD.read_text(encoding="utf-8"))
    for table in ("bahdanau2014_table1", "sutskever2014_table1", "vaswani2017_table2", "multi30k_published"):
        for name, row in paper_numbers()[table]["rows"].items():
            for key, value in row.items():
                if key in ("labels", "source", "short", "approximate"):
                    continue
                for number in value if isinstance(value, list) else [value]:  # a number, or an approximate range
                    assert float(number) in found, f"{table}.{name}.{key} = {value} is not in docs/papers.md"


def test_multi30k_published_numbers_are_the_anchors():
    rows = paper_numbers()["multi30k_published"]["rows"]
    assert rows["Transformer, text-only"]["en_de"] == 41.02 and "en_fr" not in rows["Transformer, text-only"]
    gru = rows["Attentive GRU encoder-decoders, WMT17 multimodal task"]
    assert gru["en_de"] == [36.5, 38.0] and gru["approximate"] is True
    assert paper_numbers()["multi30k_published"]["datasets"] == {"en_de": "multi30k_en_de", "en_fr": "multi30k_en_fr"}


def test_paper_rows_match_by_label_or_config_name(embedded):
    row = paper_row(embedded.model("rnnsearch50"), "bahdanau2014_table1")
    assert (row.name, row.values["all"]) == ("RNNsearch-50", 26.75)
    renamed = replace(embedded.model("rnnsearch50"), label="my model")
    assert paper_row(renamed, "bahdanau2014_table1") is None
    base = replace(embedded.model("rnnsearch50"), name="x", label="Transformer base")
    assert paper_row(base, "vaswani2017_table2").values["flops"] == 3.3e18


def test_table1_puts_the_paper_beside_every_configured_model(embedded):
    table = table1(embedded, scores_for(embedded))
    ours = table[table["model"].notna()].set_index("model")
    assert list(ours.index) == list(embedded.models)
    assert ours.loc["rnnencdec30", "all_paper"] == 13.93 and ours.loc["rnnencdec30", "no_unk_paper"] == 24.19
    assert ours.loc["rnnsearch50", "all_paper"] == 26.75 and ours.loc["rnnsearch50", "no_unk_paper"] == 34.16
    i = list(embedded.models).index("rnnsearch50")  # scores_for: BLEU 20 + its index
    assert ours.loc["rnnsearch50", "all_tokenized"] == 20 + i + 0.1
    assert (
        ours.loc["rnnsearch50", "no_unk_tokenized"] == 20 + i + 0.25
        and ours.loc["rnnsearch50", "no_unk_sentences"] == 700
    )
    paper_only = table[table["model"].isna()]
    assert list(paper_only["label"]) == [
        "RNNsearch-50* (trained longer) (paper only)",
        "Moses (phrase-based SMT) (paper only)",
    ]
    assert list(paper_only["all_paper"]) == [28.45, 33.30] and paper_only["all_tokenized"].isna().all()


def test_table1_leaves_no_unk_blank_for_subword_vocabularies(embedded):
    table = table1(embedded, scores_for(embedded, no_unk=False))
    ours = table[table["model"].notna()]
    assert ours["no_unk_tokenized"].isna().all() and ours["no_unk_sentences"].isna().all()
    bahdanau = ours[ours["model"].str.match(r"rnn(encdec|search)(30|50)$")]
    assert len(bahdanau) == 4 and bahdanau["no_unk_paper"].notna().all()  # the paper's column stays
    text = markdown(table, {"label": ("model", "{}"), "no_unk_tokenized": ("No UNK, ours", "{:.2f}")})
    assert "| RNNsearch-50 " in text and "nan" not in text


def test_training_flops_are_6_x_parameters_x_tokens_seen():
    assert training_flops(65_000_000, 2.5e9, 2.5e9) == pytest.approx(1.95e18)
    assert training_flops(1000, 10, 20) == 6 * 1000 * 30


def test_table2_estimates_flops_from_the_logged_tokens(embedded):
    logs = {
        name: pd.DataFrame({"step": [100, 200], "src_tokens": [500, 1000], "tgt_tokens": [600, 1200]})
        for name in embedded.models
    }
    logs["rnnencdec30"] = pd.DataFrame({"step": [4500], "src_tokens": [float("nan")], "tgt_tokens": [float("nan")]})
    parameters = {name: 1000 * (i + 1) for i, name in enumerate(embedded.models)}
    checkpoints = {name: checkpoint(step=200) for name in embedded.models}
    table = table2(embedded, scores_for(embedded), logs, checkpoints, parameters).set_index("model")
    assert table.loc["rnnsearch50", "tokens_seen"] == 2200
    assert table.loc["rnnsearch50", "train_flops_estimate"] == 6 * parameters["rnnsearch50"] * 2200  # C = 6 N D
    assert table.loc["rnnsearch50", "steps"] == 200
    assert pd.isna(table.loc["rnnencdec30", "train_flops_estimate"])  # an old log without token counts
    assert table["paper_train_flops"].isna().all()  # no Transformer configured in the embedded default
    assert "estimate" in table_notes(embedded, "table2") and "not the paper's" in table_notes(embedded, "table2")


def checkpoint(**stopping) -> RunCheckpoint:
    return RunCheckpoint("rnnsearch", TINY_PARAMS["rnnsearch"], 23, 19, **stopping)


def test_table2_gives_the_step_each_model_stopped_at_and_why(embedded):
    logs = {name: pd.DataFrame({"step": [900], "src_tokens": [10], "tgt_tokens": [10]}) for name in embedded.models}
    parameters = dict.fromkeys(embedded.models, 1000)
    checkpoints = {name: checkpoint(step=900) for name in embedded.models}  # written before early stopping
    old = table2(embedded, scores_for(embedded), logs, checkpoints, parameters)
    assert set(old["steps"]) == set(old["best_step"]) == {900} and old["stop_reason"].isna().all()
    assert "stopped" not in displayed(old, table2_view(old)).columns
    checkpoints["rnnsearch50"] = checkpoint(step=600, stopped_at=900, stop_reason="plateau")
    checkpoints["rnnencdec30"] = checkpoint(step=900, stopped_at=900, stop_reason="max_steps")
    table = table2(embedded, scores_for(embedded), logs, checkpoints, parameters)
    ours = table.set_index("model")
    assert ours.loc["rnnsearch50", ["steps", "best_step", "stop_reason"]].tolist() == [900, 600, "plateau"]
    shown = displayed(table, table2_view(table)).set_index("model")
    assert shown.loc["RNNsearch-50", ["steps", "weights of step", "stopped"]].tolist() == ["900", "600", "plateau"]
    assert shown.loc["RNNsearch-30", ["weights of step", "stopped"]].tolist() == ["900", ""]
    findings = dict(zip(table["model"], captions.table2_findings(table)))
    assert "1,000 parameters, stopped at step 900 (plateau), weights of step 600," in findings["rnnsearch50"]
    assert "1,000 parameters, 900 steps," in findings["rnnsearch30"]


def test_training_length_says_where_and_why_training_stopped(embedded):
    model = embedded.model("rnnsearch50")
    assert training_length(model, [checkpoint(step=2000)]) == "trained on ≤50 words, 2,000 steps"
    two = [checkpoint(step=2000), checkpoint(step=2000)]
    assert training_length(model, two) == "2 seeds, trained on ≤50 words, 2,000 steps"
    plateau = checkpoint(step=4500, stopped_at=6000, stop_reason="plateau")
    assert training_length(model, [plateau]) == "trained on ≤50 words, stopped at step 6,000: plateau, best 4,500"
    capped = checkpoint(step=8000, stopped_at=8000, stop_reason="max_steps")
    assert training_length(model, [capped]) == "trained on ≤50 words, stopped at step 8,000: max_steps"
    seeds = [plateau, checkpoint(step=5000, stopped_at=6500, stop_reason="plateau"), capped]
    assert training_length(model, seeds) == (
        "3 seeds, trained on ≤50 words, stopped at steps 6,000–8,000: plateau, max_steps"
    )


def test_table1_gives_the_interval_of_the_corpus_score_beside_it(embedded):
    scores = scores_for(embedded)
    old = table1(embedded, scores)  # bleu.json from before the bootstrap
    assert old["all_sacrebleu_ci_lo"].isna().all() and "sacreBLEU 95 % CI" not in displayed(old, table1_view(old))
    scores["rnnsearch50"]["bleu_ci"] = [21.5, 24.75]
    table = table1(embedded, scores)
    ours = table.set_index("model")
    corpus = scores["rnnsearch50"]["bleu"]  # scores_for: 20 + the model's index
    assert ours.loc["rnnsearch50", ["all_sacrebleu", *TABLE1_CI]].tolist() == [corpus, 21.5, 24.75]
    shown = displayed(table, table1_view(table)).set_index("model")
    assert shown.loc["RNNsearch-50", "sacreBLEU 95 % CI"] == "[21.50, 24.75]"
    assert shown.loc["RNNencdec-30", "sacreBLEU 95 % CI"] == ""
    assert list(shown.columns).index("sacreBLEU 95 % CI") == list(shown.columns).index("All, ours (sacreBLEU)") + 1
    finding = next(f for f in captions.table1_findings(table) if f.startswith("RNNsearch-50:"))
    assert finding.endswith(f"; sacreBLEU {corpus:.2f} [21.50, 24.75].")


def multi30k_scores(cfg) -> dict:
    """bleu.json of a Multi30k run: the usual scores and bleu_lc_tok (sacreBLEU + 0.3) with its interval."""
    scores = scores_for(cfg, no_unk=False)
    for s in scores.values():
        s |= {"bleu_lc_tok": s["bleu"] + 0.3, "bleu_lc_tok_ci": [s["bleu"] - 1.0, s["bleu"] + 1.5]}
    return scores


def test_table1_of_multi30k_puts_the_published_system_beside_our_lc_tok_bleu():
    cfg = load_config(REPO / "config" / "multi30k_en_de.yaml")
    table = table1(cfg, multi30k_scores(cfg))
    ours = table[table["model"].notna()].set_index("model")
    assert list(ours.index) == ["rnnencdec", "rnnsearch", "transducer", "seq2seq", "transformer"]
    assert ours.loc["transformer", ["all_lc_tok", *TABLE1_LC_TOK_CI]].tolist() == [24.3, 23.0, 25.5]
    assert (
        ours.loc["transformer", "published"] == "41.02"
        and ours.loc["transformer", "published_short"] == "Wu et al. 2021"
    )
    assert ours.loc["transformer", "published_source"].startswith("Wu, Kong, Bi, Li, Kao 2021 (ACL)")
    assert ours.loc["rnnsearch", "published"] == "≈ 36.5–38.0"
    assert (
        ours.loc[["rnnencdec", "transducer", "seq2seq"], "published"].isna().all()
    )  # no published Multi30k system of their kind
    shown = displayed(table, table1_view(table)).set_index("model")
    columns = ["All, ours (lc. tok. BLEU)", "lc. tok. 95 % CI", "published (lc. tok.)", "published by"]
    assert shown.loc["Transformer", columns].tolist() == ["24.30", "[23.00, 25.50]", "41.02", "Wu et al. 2021"]
    assert shown.loc["RNNencdec", "published (lc. tok.)"] == "" and shown.loc["RNNencdec", "published by"] == ""
    note = table_notes(cfg, "table1")
    assert "Published: systems on Multi30k test_2016_flickr" in note and "lc.norm.tok" in note
    assert "Wu et al. 2021: Wu, Kong, Bi, Li, Kao 2021 (ACL)" in note and "approximate range" in note
    finding = next(f for f in captions.table1_findings(table) if f.startswith("Transformer:"))
    assert finding.endswith("; lowercased tokenized BLEU 24.30 [23.00, 25.50] (published 41.02, Wu et al. 2021).")


def test_table1_shows_a_published_multi30k_value_only_where_docs_papers_md_has_one(embedded):
    en_fr = load_config(REPO / "config" / "multi30k_en_fr.yaml")
    table = table1(en_fr, multi30k_scores(en_fr))
    assert table["published"].isna().all() and table["all_lc_tok"].notna().sum() == 5  # no En-Fr anchor copied
    assert "published (lc. tok.)" not in displayed(table, table1_view(table))
    plain = table1(embedded, scores_for(embedded))  # the embedded corpus: neither the scoring nor the anchors
    assert plain["published"].isna().all() and plain["all_lc_tok"].isna().all()
    shown = displayed(plain, table1_view(plain))
    assert not {"All, ours (lc. tok. BLEU)", "published (lc. tok.)", "published by"} & set(shown.columns)
    assert "Published:" not in table_notes(embedded, "table1")
    assert all("lowercased" not in f for f in captions.table1_findings(plain))


def test_seed_runs_are_one_row_of_mean_and_min_max_in_tables_and_fig2(tmp_path):
    raw = yaml.safe_load((REPO / "config/config.yaml").read_text())
    raw["models"] = {name: raw["models"][name] for name in ("rnnencdec30", "rnnsearch50")}
    raw["seeds"] = [1, 2, 3]
    cfg, results = from_dict(raw), tmp_path / "results"
    by_length = {1: (60.0, 50.0, 40.0), 2: (62.0, 47.0, 37.0), 3: (67.0, 53.0, 31.0)}
    stops = {1: (600, 900, "plateau"), 2: (800, 1100, "plateau"), 3: (1000, 1000, "max_steps")}
    for base in ("rnnencdec30", "rnnsearch50"):
        for seed, (step, stopped_at, reason) in stops.items():
            write_run(results, cfg.model(f"{base}_seed{seed}"), by_length[seed], 2.0, 20.0 + seed, step=step,
                      stopped_at=stopped_at, stop_reason=reason)  # fmt: skip
    write_tables(cfg, results, tmp_path / "tables", tmp_path / "captions", training_logs(cfg, results))

    runs = pd.read_csv(tmp_path / "tables/bleu_by_length.csv")  # one row per run x bucket
    assert len(runs) == 2 * 3 * 3 and list(runs.columns[:4]) == ["model", "base", "seed", "label"]
    run = runs[runs["model"] == "rnnsearch50_seed2"]
    assert run["bleu"].tolist() == [62.0, 47.0, 37.0] and run["bleu_ci_lo"].tolist() == [60.0, 45.0, 35.0]
    assert set(run["base"]) == {"rnnsearch50"} and set(run["seed"]) == {2}
    wide = (tmp_path / "tables/bleu_by_length.md").read_text(encoding="utf-8")
    # mean [reproduction band]: 63 ± t(0.975; 2) · s · √(2/3) with s = √13 over 60, 62, 67; 36 ± ... s = √21
    assert "| 1–10 " in wide and "63.00 [50.33, 75.67]" in wide and "36.00 [19.90, 52.10]" in wide
    assert "where the mean of another set of as many seeds" in wide
    bands = pd.read_csv(tmp_path / "tables/bleu_by_length_band.csv").set_index(["base", "bucket_hi"])
    row = bands.loc[("rnnsearch50", 10)]
    assert row[["mean", "band_lo", "band_hi", "seed_min", "seed_max", "bootstrap_lo", "bootstrap_hi"]].tolist() == [
        63.0, 50.33, 75.67, 60.0, 67.0, 61.0, 65.0]  # fmt: skip
    assert row["n_runs"] == 3 and row["label"] == "RNNsearch-50"

    t1 = pd.read_csv(tmp_path / "tables/table1.csv").set_index("model")
    columns = ["n_runs", "all_tokenized", "all_sacrebleu", "all_sacrebleu_min", "all_sacrebleu_max", *TABLE1_CI]
    assert t1.loc["rnnsearch50", columns].tolist() == [3, 23.0, 22.0, 21.0, 23.0, 20.0, 24.0]
    assert "| RNNsearch-50 " in (tmp_path / "tables/table1.md").read_text(encoding="utf-8")
    assert "23.00 (22.00–24.00)" in (tmp_path / "tables/table1.md").read_text(encoding="utf-8")
    t2 = pd.read_csv(tmp_path / "tables/table2.csv").set_index("model")
    columns = ["steps", "steps_min", "steps_max", "best_step", "stop_reason", "tokens_seen"]
    assert t2.loc["rnnsearch50", columns].tolist() == [1000, 900, 1100, 800, "plateau, max_steps", 2200]

    caption = tmp_path / "captions/bleu_by_length.rst"
    write_bleu_by_length_figure(cfg, results, tmp_path / "figures/bleu_by_length", caption, training_logs(cfg, results))
    assert (
        "- RNNsearch-50 (3 seeds, trained on ≤50 words, stopped at steps 900–1,100: plateau, max_steps): "
        "63.0 (60.0–67.0) [61.0, 65.0] BLEU on 1–10 words, 36.0 (31.0–40.0) [34.0, 38.0] on 21–30 words;"
    ) in caption.read_text(encoding="utf-8")


def test_parameter_count_rebuilds_the_model_of_a_checkpoint(tmp_path):
    model = tiny_model("rnnsearch")
    path = tmp_path / "checkpoint.pt"
    torch.save(
        {"model": model.state_dict(), "arch": "rnnsearch", "params": TINY_PARAMS["rnnsearch"], "src_vocab": 23,
         "tgt_vocab": 19, "step": 1},
        path,
    )  # fmt: skip
    assert read_checkpoint(path).parameter_count() == count_parameters(model)
    (tmp_path / "broken.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(DataError, match="broken.pt"):
        read_checkpoint(tmp_path / "broken.pt")


def test_fig2_paper_points_only_on_a_full_run_of_the_papers_dataset(embedded):
    papers = {"bahdanau2014_fig2": {"dataset": "wmt14_en_fr", "points": {"RNNsearch-50": [[10, 25.0], [20, 26.0]]}}}
    assert fig2_paper_points(embedded, papers) == {}  # synthetic
    wmt = WmtDataConfig(src_lang="en", tgt_lang="fr", files={}, corpora={}, splits={})
    assert fig2_paper_points(replace(embedded, dataset="wmt14_en_fr", wmt=wmt), papers) == {
        "paper: RNNsearch-50": [[10, 25.0], [20, 26.0]]
    }
    assert fig2_paper_points(replace(embedded, dataset="wmt14_en_de", wmt=wmt), papers) == {}
    assert fig2_paper_points(replace(embedded, dataset="wmt14_en_fr", wmt=wmt)) == {}  # docs/papers.md has none


BUCKETS = ((0, 10), (10, 20), (20, 30))


def write_run(results, model, bleu=(50.0, 49.0, 48.0), ci=None, score=20.0, **checkpoint) -> None:
    """The files of one finished run of `model` (a ModelConfig), as score and train write them:
    bleu_by_length.csv (with a 95 % interval bleu ± ci when given), bleu.json, train_log.csv (ending at the
    step training stopped) and a checkpoint.pt (its metadata; `checkpoint` adds step, stopped_at, stop_reason)."""
    name = model.name
    (results / name).mkdir(parents=True)
    rows = pd.DataFrame({"bucket_lo": [b[0] for b in BUCKETS], "bucket_hi": [b[1] for b in BUCKETS],
                         "n_sentences": 10, "bleu": bleu})  # fmt: skip
    if ci is not None:
        rows = rows.assign(bleu_ci_lo=rows["bleu"] - ci, bleu_ci_hi=rows["bleu"] + ci)
    rows.to_csv(results / name / "bleu_by_length.csv", index=False)
    scores = {"bleu": score, "bleu_tokenized": score + 1, "n_sentences": 30, "no_unk": {"applies": False}}
    if ci is not None:
        scores["bleu_ci"] = [score - ci, score + ci]
    (results / name / "bleu.json").write_text(json.dumps(scores), encoding="utf-8")
    last = checkpoint.get("stopped_at", checkpoint.get("step", 100))
    log = {"step": [50, last], "epoch": [0, 0], "loss": [3.0, 2.0], "valid_loss": [None, 2.5],
           "src_tokens": [500, 1000], "tgt_tokens": [600, 1200]}  # fmt: skip
    pd.DataFrame(log).to_csv(results / name / "train_log.csv", index=False)
    meta = {"arch": model.arch, "params": dict(model.params), "src_vocab": 23, "tgt_vocab": 19, "step": 100}
    torch.save(meta | checkpoint, results / name / "checkpoint.pt")


def write_run_files(cfg, results) -> None:
    for i, name in enumerate(cfg.models):
        write_run(results, cfg.model(name), bleu=[50.0 - i - k for k in range(len(BUCKETS))])


def test_fig2_caption_on_a_full_run_points_to_the_projects_own_papers_page(embedded, tmp_path):
    wmt = WmtDataConfig(src_lang="en", tgt_lang="fr", files={}, corpora={}, splits={})
    full = replace(embedded, dataset="wmt14_en_fr", wmt=wmt)
    write_run_files(full, tmp_path / "results")
    caption = tmp_path / "captions/bleu_by_length.rst"
    results = tmp_path / "results"
    write_bleu_by_length_figure(
        full, results, tmp_path / "figures/bleu_by_length", caption, training_logs(full, results)
    )
    last = caption.read_text(encoding="utf-8").splitlines()[-1]
    assert last.startswith("- No paper points are drawn: the paper gives Fig. 2 as curves only")
    assert last.endswith("(no per-length numbers in docs/papers.md).") and "shared" not in last


def test_bleu_by_length_wide_and_findings():
    table = pd.DataFrame(
        {
            "model": ["a", "a", "a", "b", "b", "b"],
            "label": ["A", "A", "A", "B", "B", "B"],
            "bucket_lo": [0, 10, 20] * 2,
            "bucket_hi": [10, 20, 30] * 2,
            "bleu": [40.0, 30.0, 10.0, 50.0, 45.0, 40.0],
        }
    )
    wide = bleu_by_length_wide(table)
    assert list(wide.columns) == ["source words", "A", "B"]
    assert list(wide["source words"]) == ["1–10", "11–20", "21–30"] and list(wide["B"]) == ["50.00", "45.00", "40.00"]
    same_label = bleu_by_length_wide(table.assign(label="A"))
    assert list(same_label.columns) == ["source words", "A (a)", "A (b)"]
    findings = captions.bleu_by_length_findings(table, {"a": "A (trained on ≤30 words)", "b": "B"})
    assert findings[0] == (
        "A (trained on ≤30 words): 40.0 BLEU on 1–10 words, 10.0 on 21–30 words; first below half its best (40.0) "
        "at 21–30 words."
    )
    assert findings[1].endswith("never below half its best (50.0).")


@pytest.mark.parametrize("name", ["wmt14_en_fr.yaml", "wmt14_en_de.yaml"])
def test_the_full_configs_models_find_their_papers_rows(name):
    cfg = load_config(REPO / "config" / name)
    for model in cfg.models.values():
        row = paper_row(model, "bahdanau2014_table1", "sutskever2014_table1") or paper_row(model, "vaswani2017_table2")
        has_paper_number = model.arch in ("rnnenc", "rnnsearch", "seq2seq", "transformer")
        assert (row is not None) == has_paper_number, (model.name, model.label)
