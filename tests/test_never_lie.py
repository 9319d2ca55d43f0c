"""Numbers that never lie (issue 39), through the commands a user types (`snakemake`, `attnrepro`): a check
that says what it did not check, a translation that refuses the wrong checkpoint, a config that refuses a
number that means nothing, a failed or diverged run that says so in one line. Each asserts the exit status,
the one line, and that nothing under results/ was lost or silently changed.

Round two (issue 45): a table that gives a cell twice, files of one run read with another config, a NaN
validation loss, ids of another tokenizer, two trainings into one folder, `--cores 0`, and tables that say
what their rows are (parameters, seeds, commits).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import pytest
import yaml
from test_user_errors import RESULTS, TEST_YAML, attnrepro, snapshot

from attnrepro.config import load_config
from attnrepro.config.constraints import RESERVED_NAMES, RESULT_FOLDERS, RULE_NAMES
from attnrepro.data.batching import Corpus
from attnrepro.data.tokenize import load_tokenizer
from attnrepro.errors import DataError
from attnrepro.training.checkpoint import UNFINGERPRINTED, tokenizer_fingerprint

from conftest import REPO, snakemake

REFERENCE = REPO / "docs/figures/bleu_by_length.csv"


# ---- a config that means nothing ------------------------------------------------------------------


def _config(tmp_path: Path, edit) -> Path:
    raw = yaml.safe_load(TEST_YAML.read_text())
    edit(raw)
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _train(key, value):
    return lambda raw: raw["models"]["rnnsearch10"]["train"].update({key: value})


CONFIG_CASES = {
    "label_smoothing 1": (_train("label_smoothing", 1.0), "models.rnnsearch10.train.label_smoothing: 1.0 is greater "
                          "than or equal to the maximum of 1"),
    "label_smoothing nan": (_train("label_smoothing", float("nan")),
                            "models.rnnsearch10.train.label_smoothing: nan is not a finite number"),
    "lr nan": (_train("lr", float("nan")), "models.rnnsearch10.train.lr: nan is not a finite number"),
    "lr inf": (_train("lr", float("inf")), "models.rnnsearch10.train.lr: inf is not a finite number"),
    "a param -inf": (lambda raw: raw["models"]["rnnsearch10"]["params"].update(dropout=float("-inf")),
                     "models.rnnsearch10.params.dropout: -inf is not a finite number"),
    "search nan": (lambda raw: raw["search"].update(length_penalty=float("nan")),
                   "search.length_penalty: nan is not a finite number"),
    "plateau_decays without patience": (
        lambda raw: raw["models"]["rnnsearch10"]["train"].update(patience=0, plateau_decays=1),
        "models.rnnsearch10.train.plateau_decays=1 lowers the learning rate at a plateau, but patience=0 never "
        "finds one: set patience > 0, or plateau_decays: 0"),
    "seeds 2**32": (lambda raw: raw.update(seeds=[1, 2**32]), "seeds.1: 4294967296 is greater than the maximum of "
                    "4294967295"),
    "train.seed 2**32": (_train("seed", 2**32), "models.rnnsearch10.train.seed: 4294967296 is greater than the "
                         "maximum of 4294967295"),
    "max_len 25": (lambda raw: raw["evaluate"].update(max_len=25, bucket_width=10),
                   "evaluate.max_len=25 is not a multiple of evaluate.bucket_width=10: the last length bucket "
                   "would overlap the one before it"),
    "a model named tables": (lambda raw: raw["models"].update(tables=raw["models"].pop("rnnsearch10")),
                             f"models.tables: 'tables' is the name of a rule or of a folder under "
                             f"results/synthetic_test/; rename the model (reserved: {', '.join(RESERVED_NAMES)})"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CONFIG_CASES))
def test_a_config_that_means_nothing_stops_the_dry_run_in_one_line(tmp_path, case):
    edit, line = CONFIG_CASES[case]
    out = snakemake(tmp_path / "work", _config(tmp_path, edit), "-n")
    assert out.returncode != 0
    assert line in out.stdout.splitlines(), out.stdout + out.stderr[-2000:]
    assert "Traceback" not in out.stdout + out.stderr
    assert not (tmp_path / "work" / "results").exists()


def test_the_reserved_names_are_the_rules_and_the_folders_under_results():
    """RULE_NAMES is what `snakemake --list` lists (the synthetic and the WMT configs together), RESULT_FOLDERS
    the folders the rules write under results/{dataset}/."""
    listed = set()
    for config in ("config/test.yaml", "config/multi30k_en_de.yaml"):  # synthetic: generate; WMT: the downloads
        command = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--list"]
        out = subprocess.run([*command, "--configfile", config], capture_output=True, text=True, cwd=REPO)
        listed |= {m.group(1) for m in re.finditer(r"^(\w+)", out.stdout, flags=re.MULTILINE)} - {"Using"}
    assert listed == set(RULE_NAMES)
    rules = "\n".join(p.read_text() for p in [REPO / "Snakefile", *sorted((REPO / "workflow/rules").glob("*.smk"))])
    assert set(re.findall(r"RESULTS\}/(\w+)(?=[/\"])", rules)) == set(RESULT_FOLDERS)


# ---- attnrepro compare -----------------------------------------------------------------------------


def _compare(tmp_path: Path, table: pd.DataFrame | str | Path, *args: str, reference=REFERENCE):
    if isinstance(table, pd.DataFrame):
        path = tmp_path / "table.csv"
        table.to_csv(path, index=False)
    else:
        path = Path(table)
    return attnrepro("compare", "--reference", str(reference), "--table", str(path), *args)


def test_compare_counts_every_cell_of_the_reference_and_names_the_missing_ones(tmp_path):
    reference = pd.read_csv(REFERENCE)
    n, one_row = len(reference), reference.head(1)
    out = _compare(tmp_path, one_row)
    assert out.returncode == 1, out.stdout
    lines = out.stdout.splitlines()
    assert lines[0] == (f"1 of {n} cells of the reference ({100 / n:.1f} %) have their mean inside the band of 3-run "
                        "means (needed: 90 %)")  # fmt: skip
    assert lines[1] == f"{n - 1} of the reference's {n} cells not checked, counted as not inside: the check fails:"
    assert lines[2] == "  missing: RNNencdec-30 (rnnencdec30), 11–20 words: not in the run's table"
    allowed = _compare(tmp_path, one_row, "--allow-missing")
    assert allowed.returncode == 0 and allowed.stdout.startswith("1 of 1 cells checked (100.0 %)")
    assert f"{n - 1} of the reference's {n} cells not checked, not counted (--allow-missing):" in allowed.stdout


def test_compare_names_the_reference_cells_without_a_band(tmp_path):
    reference = pd.read_csv(REFERENCE)
    reference.loc[:9, ["band_lo", "band_hi", "run_band_lo", "run_band_hi"]] = float("nan")
    reference.to_csv(tmp_path / "reference.csv", index=False)
    out = _compare(tmp_path, REFERENCE, reference=tmp_path / "reference.csv")
    assert out.returncode == 1
    n = len(reference)
    assert out.stdout.splitlines()[0].startswith(f"{n - 10} of {n} cells of the reference ({100 * (n - 10) / n:.1f} %)")
    assert "  not comparable: RNNencdec-30 (rnnencdec30), 1–10 words: the reference has no band here" in (
        out.stdout.splitlines()
    )


def test_a_one_seed_table_is_checked_against_the_one_run_band_and_says_so(tmp_path):
    """A run of one seed whose cells lie just outside the band of 3-run means but inside the one-run band."""
    reference = pd.read_csv(REFERENCE)
    run = reference.assign(n_runs=1)
    wide = (reference["band_hi"] < 100) & (reference["run_band_hi"] > reference["band_hi"] + 0.2)
    run.loc[wide, "mean"] = reference.loc[wide, "band_hi"] + 0.1
    assert wide.sum() >= 40
    out = _compare(tmp_path, run)
    assert out.returncode == 0, out.stdout
    n = len(reference)
    assert out.stdout.splitlines()[0] == (f"{n} of {n} cells of the reference (100.0 %) have their mean inside the "
                                          "one-run band (needed: 90 %)")  # fmt: skip
    three = _compare(tmp_path, run.assign(n_runs=3))
    assert three.returncode == 1 and f"{n - wide.sum()} of {n} cells" in three.stdout.splitlines()[0]
    two = _compare(tmp_path, run.assign(n_runs=2))
    assert two.returncode == 1
    assert "a mean of 2 runs; the reference has bands for one run and for means of 3" in two.stdout


def test_a_band_where_every_seed_scored_the_same_is_as_wide_as_the_test_set_resolves(tmp_path):
    """Committed cells of [100.0, 100.0] (every seed perfect): a run at 99.99 was outside; one word wrong in the
    bucket of 1-10 words costs a perfect translation 0.24 BLEU there (11-20: 0.07)."""
    reference = pd.read_csv(REFERENCE)
    zero = reference["band_lo"] == reference["band_hi"]
    n, n_zero = len(reference), int(zero.sum())
    assert n_zero >= 3 and (reference.loc[zero, "band_hi"] == 100).all()
    assert (reference.loc[zero & (reference["bucket_hi"] == 10), "resolution"] == 0.24).all()
    run = reference.copy()
    run.loc[zero, "mean"] = 99.99
    out = _compare(tmp_path, run)
    assert out.returncode == 0 and out.stdout.startswith(f"{n} of {n} cells")
    narrow = int(((reference["band_hi"] - reference["band_lo"]) / 2 < reference["resolution"]).sum())  # zero included
    assert (
        n_zero <= narrow and f"{narrow} band(s) narrower than the test set's resolution (one wrong word" in out.stdout
    )
    assert zero[(reference["base"] == "rnnsearch30") & (reference["bucket_hi"] == 10)].all()
    run.loc[zero, "mean"] = 99.5  # two wrong words and more: outside
    assert "outside: RNNsearch-30 (rnnsearch30), 1–10 words: 99.5, band [99.8, 100.0]" in _compare(tmp_path, run).stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "{path}: is empty, not a band table"),
        (None, "{path}: is a folder, not a band table (a bleu_by_length_band.csv)"),
        ("base,label,bucket_lo,bucket_hi,n_runs,mean,band_lo,band_hi\na,A,0,10,3,high,1,2\n",
         "{path}:2: column mean holds 'high', not a number"),
    ],
    ids=["empty", "folder", "not a number"],
)  # fmt: skip
def test_compare_reads_a_bad_table_in_one_line(tmp_path, content, message):
    path = tmp_path / "table.csv"
    path.mkdir() if content is None else path.write_text(content)
    out = _compare(tmp_path, path)
    assert (out.returncode, out.stderr.splitlines()) == (1, [f"attnrepro compare: error: {message.format(path=path)}"])


@pytest.mark.parametrize("fraction", ["90", "-0.1", "nan"])
def test_compare_refuses_a_min_inside_that_is_not_a_fraction(tmp_path, fraction):
    out = _compare(tmp_path, REFERENCE, "--min-inside", fraction)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.splitlines() == [f"attnrepro compare: error: --min-inside {float(fraction)}: not a fraction in "
                                       "[0, 1] (0.9: 90 % of the cells)"]  # fmt: skip


def test_compare_into_head_is_no_traceback(tmp_path):
    reference = pd.read_csv(REFERENCE)
    run = reference.assign(mean=0.0)  # every cell outside: a long report
    run.to_csv(tmp_path / "table.csv", index=False)
    command = (f"{sys.executable} -m attnrepro.cli compare --reference {REFERENCE} --table {tmp_path / 'table.csv'}"
               " | head -c 10")  # fmt: skip
    for _ in range(3):  # it raced: 2 of 3 tries
        out = subprocess.run(["bash", "-c", command], capture_output=True, text=True)
        inside = int((reference["band_lo"] <= 0).sum())  # bands that reach 0 BLEU hold a mean of 0
        assert out.stderr == "" and out.stdout == f"{inside} of {len(reference)} cells"[:10]


# ---- a checkpoint and the tokenizer it was trained with ------------------------------------------


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """config/test.yaml's two models trained by Snakemake, and other tokenizers: of another size (`small`), and
    one of the same sizes but other target pieces (`mixed`: bpe's target side)."""
    workdir = tmp_path_factory.mktemp("trained")
    targets = [f"{RESULTS}/{m}/checkpoint.pt" for m in ("rnnsearch10", "rnnencdec20")]
    out = snakemake(workdir, TEST_YAML, "--cores", "2", *targets)
    assert out.returncode == 0, out.stderr[-3000:]
    for name, edit in (("bpe", {"spm_model_type": "bpe"}), ("small", {"vocab_size": 100})):
        raw = yaml.safe_load(TEST_YAML.read_text())
        raw["tokenizers"]["spm"].update(edit)
        (workdir / f"{name}.yaml").write_text(yaml.safe_dump(raw))
        data = workdir / RESULTS / "data"
        made = attnrepro("tokenizer", "--config", str(workdir / f"{name}.yaml"), "--name", "spm", "--src",
                         str(data / "train.src"), "--tgt", str(data / "train.tgt"), "--out-dir", f"other/{name}",
                         cwd=workdir)  # fmt: skip
        assert made.returncode == 0, made.stderr
    mixed = workdir / "other/mixed"  # the trained source side, bpe's target side: the same sizes, other pieces
    mixed.mkdir()
    shutil.copy(workdir / RESULTS / "tokenizer/spm/src.model", mixed / "src.model")
    shutil.copy(workdir / "other/bpe/tgt.model", mixed / "tgt.model")
    return workdir


def _translate(workdir: Path, tokenizer: str, model: str = "rnnsearch10", checkpoint: str = "rnnsearch10"):
    data = f"{RESULTS}/data"
    return attnrepro("translate", "--config", str(TEST_YAML), "--model", model, "--checkpoint",
                     f"{RESULTS}/{checkpoint}/checkpoint.pt", "--tokenizer-dir", tokenizer, "--src",
                     f"{data}/test.src", "--ref", f"{data}/test.tgt", "--out", "out/hyp.txt", "--attention",
                     "out/attn.npz", "--out-no-unk", "out/no_unk.txt", cwd=workdir)  # fmt: skip


@pytest.mark.slow
def test_translate_refuses_a_checkpoint_of_another_tokenizer_naming_both(trained):
    before = snapshot(trained)
    ckpt = f"{RESULTS}/rnnsearch10/checkpoint.pt"
    other = _translate(trained, "other/small")
    assert (other.returncode, other.stdout) == (1, "")
    assert re.fullmatch(
        rf"attnrepro translate: error: {ckpt}: trained with vocabularies of \d+/\d+ entries in {RESULTS}/tokenizer/spm"
        r", but --tokenizer-dir other/small has \d+/\d+: use the tokenizer it was trained with\n",
        other.stderr,
    ), other.stderr
    same_size = _translate(trained, "other/mixed")
    assert same_size.returncode == 1 and len(same_size.stderr.splitlines()) == 1
    assert re.fullmatch(
        rf"attnrepro translate: error: {ckpt}: trained with the tokenizer in {RESULTS}/tokenizer/spm \(tgt.model "
        r"sha256 [0-9a-f]{16}\), but --tokenizer-dir other/mixed holds another \([0-9a-f]{16}\): use the tokenizer "
        r"it was trained with\n",
        same_size.stderr,
    ), same_size.stderr
    wrong_model = _translate(trained, f"{RESULTS}/tokenizer/spm", model="rnnencdec20")
    assert wrong_model.returncode == 1
    assert wrong_model.stderr.startswith(f"attnrepro translate: error: {ckpt}: a checkpoint of rnnsearch ")
    assert ", but models.rnnencdec20 is rnnenc " in wrong_model.stderr
    assert snapshot(trained) == before and not (trained / "out").exists()
    right = _translate(trained, f"{RESULTS}/tokenizer/spm")
    assert right.returncode == 0, right.stderr


@pytest.mark.slow
def test_average_refuses_a_checkpoint_of_another_model(trained):
    before = snapshot(trained)
    out = attnrepro("average", "--config", str(TEST_YAML), "--model", "rnnencdec20", "--checkpoint",
                    f"{RESULTS}/rnnsearch10/checkpoint.pt", "--out", "averaged.pt", cwd=trained)  # fmt: skip
    assert out.returncode == 1 and len(out.stderr.splitlines()) == 1
    assert out.stderr.startswith(f"attnrepro average: error: {RESULTS}/rnnsearch10/checkpoint.pt: a checkpoint of "
                                 "rnnsearch ")  # fmt: skip
    assert snapshot(trained) == before and not (trained / "averaged.pt").exists()


# ---- training that cannot go on, and training that went nowhere ----------------------------------


def _one_model(tmp_path: Path, name: str = "one", **train) -> Path:
    raw = yaml.safe_load(TEST_YAML.read_text())
    raw["models"] = {"rnnsearch10": raw["models"]["rnnsearch10"]}
    raw["models"]["rnnsearch10"]["train"].update(train)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.slow
def test_a_non_finite_loss_is_one_line_naming_a_checkpoint_that_exists_or_none(tmp_path):
    work = tmp_path / "work"
    target = f"{RESULTS}/rnnsearch10/checkpoint.pt"
    out = snakemake(work, _one_model(tmp_path, lr=1.0e30, clip_norm=0.0), "--cores", "1", target)
    assert out.returncode != 0
    log = (work / RESULTS / "logs/train_rnnsearch10.log").read_text()
    assert "Traceback" not in log, log
    line = re.findall(r"attnrepro train: error: .*", log)  # after the progress bar's carriage return
    assert len(line) == 1 and re.fullmatch(
        r"attnrepro train: error: rnnsearch10: loss is (nan|inf) at step \d+; no checkpoint was written before it "
        r"\(training starts from step 0 when rerun\): lower train.lr", line[0]), log  # fmt: skip
    assert not (work / RESULTS / "rnnsearch10/resume/last.pt").exists()


@pytest.mark.slow
def test_a_checkpoint_that_cannot_be_written_is_one_line_and_the_earlier_one_is_kept(tmp_path):
    """As a full disk or a read-only folder: the temporary file of the checkpoint cannot be written (a folder
    stands in its way, which also stops root)."""
    work, config = tmp_path / "work", _one_model(tmp_path, checkpoint_every=10, max_steps=20)
    target = f"{RESULTS}/rnnsearch10/checkpoint.pt"
    first = snakemake(work, _one_model(tmp_path, "ten", checkpoint_every=10, max_steps=10), "--cores", "1", target)
    assert first.returncode == 0, first.stderr[-3000:]
    resume = work / RESULTS / "rnnsearch10/resume"
    (resume / ".last.pt.tmp").mkdir()
    (work / target).unlink()  # the run is continued to 20 updates
    before = {
        k: v
        for k, v in snapshot(work).items()
        if "rnnsearch10" not in k and not k.startswith(("synthetic_test/logs", "synthetic_test/config"))
    }
    last = (resume / "last.pt").read_bytes()
    out = snakemake(work, config, "--cores", "1", target)
    assert out.returncode != 0
    log = (work / RESULTS / "logs/train_rnnsearch10.log").read_text()
    assert "Traceback" not in log, log
    assert re.findall(r"attnrepro train: error: .*", log) == [  # after the progress bar's carriage return
        f"attnrepro train: error: {RESULTS}/rnnsearch10/resume/last.pt: Is a directory; the checkpoints written "
        "before are kept: free space or make the folder writable and rerun the same command to resume"
    ]
    assert (resume / "last.pt").read_bytes() == last
    after = snapshot(work)
    assert {k: after[k] for k in before} == before
    (resume / ".last.pt.tmp").rmdir()
    again = snakemake(work, config, "--cores", "1", target)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming rnnsearch10 from step 10" in (work / RESULTS / "logs/train_rnnsearch10.log").read_text()


@pytest.mark.slow
def test_a_diverged_run_says_so_in_its_log_table_1_and_the_figure(tmp_path):
    work = tmp_path / "work"
    out = snakemake(work, _one_model(tmp_path, lr=1000.0, clip_norm=0.0, max_steps=30), "--cores", "2", "figures")
    assert out.returncode == 0, out.stderr[-3000:]
    log = (work / RESULTS / "logs/train_rnnsearch10.log").read_text().strip().splitlines()
    assert re.fullmatch(r"rnnsearch10: WARNING: training diverged: its best validation loss, [\d.e+]+, is no lower "
                        r"than its first, [\d.e+]+; its scores are not a result of this model \(lower train.lr\)",
                        log[-1]), log[-3:]  # fmt: skip
    table1 = pd.read_csv(work / RESULTS / "tables/table1.csv")
    assert table1.loc[table1["model"] == "rnnsearch10", "label"].tolist() == ["RNNsearch-10 (DIVERGED)"]
    assert "WARNING: training diverged (rnnsearch10: " in (work / RESULTS / "tables/table1.md").read_text()
    figure_log = (work / RESULTS / "logs/figure_length.log").read_text()
    assert "WARNING: rnnsearch10: training diverged:" in figure_log and "marked (DIVERGED) in the legend" in figure_log


# ==== round two (issue 45): files that contradict each other or themselves, a run that went wrong quietly,
# ==== a command that can never start, and comparisons that say what they compare


# ---- compare: a table that contradicts itself, and a comparison of nothing -------------------------


def test_compare_refuses_a_table_that_gives_a_cell_twice(tmp_path):
    """Every row of the reference, then every row again with mean 0: before, "88 of 88 cells ... inside"."""
    reference = pd.read_csv(REFERENCE)
    twice = pd.concat([reference, reference.assign(mean=0.0)], ignore_index=True)
    out = _compare(tmp_path, twice)
    first, n = reference.iloc[0], len(reference)
    key = f"{first['base']}, {int(first['bucket_lo']) + 1}–{int(first['bucket_hi'])} words"
    assert (out.returncode, out.stdout) == (1, "")
    assert out.stderr.splitlines() == [
        f"attnrepro compare: error: {tmp_path / 'table.csv'}: {key} is given 2 times (lines 2 and {n + 2}): a band "
        "table holds each model and bucket once"
    ]
    as_reference = _compare(tmp_path, REFERENCE, reference=tmp_path / "table.csv")  # the reference is checked too
    assert as_reference.returncode == 1 and "is given 2 times" in as_reference.stderr


def test_compare_says_why_no_cell_was_compared(tmp_path):
    reference = pd.read_csv(REFERENCE)
    others = reference.assign(base="other" + reference["base"])  # none of the reference's models
    out = _compare(tmp_path, others, "--allow-missing")
    assert out.returncode == 1
    first = out.stdout.splitlines()[0]
    assert first.startswith(f"no cell compared: the run's table has none of the reference's {len(reference)} cells "
                            "(its models: otherrnnencdec30, ")  # fmt: skip
    assert first.endswith("; the check fails (needed: 90 %)")
    assert "0 of 0" not in out.stdout and "no band" not in out.stdout
    wide = reference[reference["bucket_hi"] % 20 == 0].assign(bucket_lo=lambda t: t["bucket_hi"] - 20)
    out = _compare(tmp_path, wide, "--allow-missing")  # the run scored with evaluate.bucket_width: 20
    assert (out.returncode, out.stdout) == (1, "")
    assert out.stderr.splitlines() == [
        f"attnrepro compare: error: {tmp_path / 'table.csv'}: buckets 20 words wide, but {REFERENCE} has buckets 10 "
        "words wide: no cell of one is a cell of the other; score the run with evaluate.bucket_width: 10 to compare it"
    ]


def test_compare_takes_another_models_size_for_another_model_and_names_seeds_and_commits(tmp_path):
    reference = pd.read_csv(REFERENCE).assign(parameters=1000, seeds="1, 2, 3", commit="aaaa")
    reference.to_csv(tmp_path / "reference.csv", index=False)
    run = reference.assign(seeds="4, 5, 6", commit="bbbb")
    bigger = run["base"] == "rnnsearch50"
    run.loc[bigger, "parameters"] = 1400
    out = _compare(tmp_path, run, reference=tmp_path / "reference.csv")
    n, k = len(reference), int(bigger.sum())
    assert out.returncode == 1 and out.stdout.startswith(f"{n - k} of {n} cells")
    assert "  not comparable: RNNsearch-50 (rnnsearch50), 1–10 words: the run's model has 1,400 parameters, the " \
           "reference's 1,000: another model" in out.stdout.splitlines()  # fmt: skip
    assert out.stdout.splitlines()[-2:] == ["seeds: the run's 4, 5, 6; the reference's 1, 2, 3",
                                            "commit: the run's bbbb; the reference's aaaa"]  # fmt: skip


# ---- tables and figures: a run of another config, a diverged run, what the rows are ----------------

SENTENCES = [" ".join(["w"] * n) for n in (3, 7, 12, 15, 22, 28, 33, 38)]  # two per 10-word bucket up to 40


@pytest.fixture(scope="module")
def scored(tmp_path_factory) -> Path:
    """bleu.json and bleu_by_length.csv of config/test.yaml's models written by `attnrepro score` (a hypothesis
    that drops every sentence's last word), under results/{model}/."""
    root = tmp_path_factory.mktemp("scored")
    text = root / "text"
    text.mkdir()
    (text / "src.txt").write_text("".join(s + "\n" for s in SENTENCES))
    (text / "ref.txt").write_text("".join(s + "\n" for s in SENTENCES))
    (text / "hyp.txt").write_text("".join(s.rsplit(" ", 1)[0] + "\n" for s in SENTENCES))
    (text / "no_unk.txt").write_text("")
    for name in load_config(TEST_YAML).models:
        run = root / "results" / name
        out = attnrepro("score", "--config", str(TEST_YAML), "--model", name, "--src", str(text / "src.txt"), "--hyp",
                        str(text / "hyp.txt"), "--hyp-no-unk", str(text / "no_unk.txt"), "--ref",
                        str(text / "ref.txt"), "--json", str(run / "bleu.json"), "--csv",
                        str(run / "bleu_by_length.csv"))  # fmt: skip
        assert out.returncode == 0, out.stderr
    return root / "results"


def _run_files(tmp_path: Path, scored: Path, valid_losses=None, commits=None, stopped_at=20) -> Path:
    """results/ of config/test.yaml's models as a finished run leaves them: the `scored` files, train_log.csv in
    the trainer's format (valid_losses: model -> the text of its validation rows), checkpoint.pt with the keys
    training writes (not the weights: the tables and figures read no weights)."""
    import torch

    from attnrepro.training.log import LOG_FIELDS

    results = tmp_path / "results"
    shutil.copytree(scored, results)
    for name in load_config(TEST_YAML).models:
        mc, run = load_config(TEST_YAML).model(name), results / name
        losses = (valid_losses or {}).get(name, ["3.1", "2.9"])
        rows = [",".join(["5", "0", "4.0", "0.003", "100.0", "0.9", "", "50", "60", ""])]
        rows += [",".join([str(10 * (i + 1)), "0", "3.0", "0.003", "100.0", "0.9", loss, str(100 * (i + 1)),
                           str(120 * (i + 1)), ""]) for i, loss in enumerate(losses)]  # fmt: skip
        (run / "train_log.csv").write_text(",".join(LOG_FIELDS) + "\n" + "".join(r + "\n" for r in rows))
        train = asdict(mc.train)
        fingerprint = {"arch": mc.arch, "params": dict(mc.params), "train": {k: v for k, v in train.items()
                                                                             if k not in UNFINGERPRINTED}}  # fmt: skip
        meta = {"model": {}, "arch": mc.arch, "params": dict(mc.params), "src_vocab": 120, "tgt_vocab": 120,
                "step": 10 * len(losses), "valid_loss": 2.9, "stopped_at": stopped_at, "stop_reason": "max_steps",
                "train": train, "tokenizer": None, "fingerprint": fingerprint,
                "commit": (commits or {}).get(name, "0123456789ab")}  # fmt: skip
        torch.save(meta, run / "checkpoint.pt")
    return results


def _report_verbs(config: Path, results: Path, out: Path) -> dict[str, subprocess.CompletedProcess]:
    """`attnrepro tables`, `figure-length` and `figure-training` over `results`, as the report rules call them."""
    return {
        "tables": attnrepro("tables", "--config", str(config), "--results", str(results), "--out-dir",
                            str(out / "tables"), "--captions", str(out / "captions")),
        "figure-length": attnrepro("figure-length", "--config", str(config), "--results", str(results), "--figure",
                                   str(out / "figures/bleu_by_length"), "--caption",
                                   str(out / "captions/bleu_by_length.rst")),
        "figure-training": attnrepro("figure-training", "--config", str(config), "--results", str(results),
                                     "--figure", str(out / "figures/training_curves"), "--caption",
                                     str(out / "captions/training_curves.rst")),
    }  # fmt: skip


def test_tables_and_figures_refuse_a_run_of_another_config_naming_the_file(tmp_path, scored):
    """The issue's case: a config that says hidden 32 and bucket width 20 over a run trained with hidden 24 and
    scored at width 10. Before: the "-h32" label on the hidden-24 checkpoint's numbers, buckets of 10, exit 0."""
    results = _run_files(tmp_path, scored)
    checkpoint = results / "rnnsearch10/checkpoint.pt"

    def hidden_32(raw):
        raw["models"]["rnnsearch10"]["params"]["hidden"] = 32
        raw["models"]["rnnsearch10"]["label"] = "RNNsearch-10-h32"

    other_model = _config(tmp_path, hidden_32)
    for verb, out in _report_verbs(other_model, results, tmp_path / "h32").items():
        assert (out.returncode, len(out.stderr.splitlines())) == (1, 1), (verb, out.stderr)
        assert out.stderr.startswith(f"attnrepro {verb}: error: {checkpoint}: a checkpoint of rnnsearch {{'emb': 16, "
                                     "'hidden': 24, ")  # fmt: skip
        assert "but models.rnnsearch10 is rnnsearch {'emb': 16, 'hidden': 32, " in out.stderr
    assert not (tmp_path / "h32/tables").exists() and not (tmp_path / "h32/figures").exists()

    other_lr = _config(tmp_path, _train("lr", 0.001))
    out = _report_verbs(other_lr, results, tmp_path / "lr")["tables"]
    assert out.stderr.splitlines() == [f"attnrepro tables: error: {checkpoint}: trained with train.lr=0.003, but the "
                                       "config's rnnsearch10 has train.lr=0.001: read it with the config it was "
                                       "trained with, or train this model"]  # fmt: skip

    width_20 = _config(tmp_path, lambda raw: raw["evaluate"].update(bucket_width=20))
    outs = _report_verbs(width_20, results, tmp_path / "w20")
    by_length = results / "rnnencdec20/bleu_by_length.csv"
    assert outs["tables"].stderr.splitlines() == [f"attnrepro tables: error: {results / 'rnnencdec20/bleu.json'}: "
                                                  "scored with evaluate.bucket_width=10, but the config has "
                                                  "evaluate.bucket_width=20: score again with this config, or read the"
                                                  " run with the config it was scored with"]  # fmt: skip
    assert outs["figure-length"].stderr.splitlines() == [
        f"attnrepro figure-length: error: {by_length}: bucket 1–10 (10 words wide) is not one of the config's "
        "(evaluate.bucket_width=20, max_len=40): score again with this config, or read the run with the config it "
        "was scored with"
    ]
    assert outs["figure-training"].returncode == 0  # the training curves do not depend on the buckets

    log = results / "rnnsearch10/train_log.csv"
    log.write_text(log.read_text() + log.read_text().splitlines()[-1] + "\n")  # a second writer's row
    out = _report_verbs(TEST_YAML, results, tmp_path / "twice")["figure-training"]
    assert out.stderr.splitlines() == [
        f"attnrepro figure-training: error: {log}: step 20 is logged 2 times (lines 4 and 5): two runs wrote this log "
        "at once; train again into a folder of its own"
    ]


def test_a_nan_validation_loss_marks_the_run_diverged_in_every_table_legend_and_caption(tmp_path, scored):
    """train_log.csv writes a validation loss that is not a number as `nan`; the divergence check used to drop
    every NaN (as if no validation had been made): no mark, no warning."""
    results = _run_files(tmp_path, scored, valid_losses={"rnnsearch10": ["3.1", "nan"]})
    outs = _report_verbs(TEST_YAML, results, tmp_path)
    assert all(out.returncode == 0 for out in outs.values()), {v: o.stderr for v, o in outs.items()}
    why = "rnnsearch10: its validation loss is nan at step 20 (1 of its 2 validations not finite)"
    for verb in ("figure-length", "figure-training"):
        assert f"WARNING: {why.replace(': its', ': training diverged: its')}; marked (DIVERGED) in the legend" in (
            outs[verb].stderr
        )
    for table in ("table1", "table2"):
        rows = pd.read_csv(tmp_path / f"tables/{table}.csv").set_index("model")
        assert rows.loc["rnnsearch10", "label"] == "RNNsearch-10 (DIVERGED)" and rows.loc["rnnencdec20", "label"] == (
            "RNNencdec-20"
        )
        assert (
            f"WARNING: training diverged ({why}); these rows are marked (DIVERGED)."
            in (tmp_path / f"tables/{table}.md").read_text()
        )
    assert re.search(r"\| RNNsearch-10 \(DIVERGED\) +\|", (tmp_path / "tables/bleu_by_length.md").read_text())
    bands = pd.read_csv(tmp_path / "tables/bleu_by_length_band.csv")
    assert set(bands.loc[bands["base"] == "rnnsearch10", "label"]) == {"RNNsearch-10 (DIVERGED)"}
    captions = {p.name: p.read_text() for p in (tmp_path / "captions").glob("*.rst")}
    assert set(captions) == {"table1.rst", "table2.rst", "bleu_by_length_table.rst", "bleu_by_length.rst",
                             "training_curves.rst"}  # fmt: skip
    assert all("RNNsearch-10 (DIVERGED)" in text for text in captions.values()), captions


def test_a_validation_loss_that_is_not_a_number_is_not_a_missing_one(tmp_path):
    from attnrepro.training.log import read_train_log, run_divergence

    path = tmp_path / "train_log.csv"
    path.write_text("step,loss,valid_loss\n5,4.0,\n10,3.0,2.5\n15,2.0,\n20,1.0,inf\n")
    log = read_train_log(path)
    assert log["validated"].tolist() == [False, True, False, True]
    assert run_divergence(log) == "its validation loss is inf at step 20 (1 of its 2 validations not finite)"
    path.write_text("step,loss,valid_loss\n5,4.0,\n10,3.0,2.5\n15,2.0,\n20,1.0,2.4\n")
    assert run_divergence(read_train_log(path)) is None
    path.write_text("step,loss,valid_loss\n10,3.0,2.5\n20,1.0,low\n")
    with pytest.raises(DataError, match=r"train_log.csv:3: valid_loss holds 'low', not a number"):
        read_train_log(path)


def test_every_table_says_each_models_parameters_and_where_rows_differ_in_seeds_and_commit(tmp_path, scored):
    results = _run_files(tmp_path, scored, commits={"rnnsearch10": "bbbbbbbbbbbb+modified"})
    out = _report_verbs(TEST_YAML, results, tmp_path)["tables"]
    assert out.returncode == 0, out.stderr
    from attnrepro.models import parameter_count

    cfg = load_config(TEST_YAML)
    counts = {name: parameter_count(m.arch, 120, 120, dict(m.params)) for name, m in cfg.models.items()}
    assert counts["rnnsearch10"] != counts["rnnencdec20"]
    for table in ("table1", "table2"):
        rows = pd.read_csv(tmp_path / f"tables/{table}.csv").dropna(subset="model").set_index("model")  # ours
        assert rows["parameters"].to_dict() == counts
        assert rows["commit"].to_dict() == {"rnnencdec20": "0123456789ab", "rnnsearch10": "bbbbbbbbbbbb+modified"}
        md = (tmp_path / f"tables/{table}.md").read_text()
        header = [cell.strip() for cell in md.splitlines()[0].strip("|").split("|")]
        assert {"parameters", "trained at commit"} <= set(header) and "seeds" not in header  # the seeds: said once
        assert "Runs: every row's seeds: 1; the rows differ in commit (a column says which)." in md
    wide = (tmp_path / "tables/bleu_by_length.md").read_text()
    assert re.search(rf"\| parameters +\| {counts['rnnencdec20']:,} +\| {counts['rnnsearch10']:,} +\|", wide), wide
    bands = pd.read_csv(tmp_path / "tables/bleu_by_length_band.csv").drop_duplicates("base").set_index("base")
    assert bands["parameters"].to_dict() == counts and bands.loc["rnnsearch10", "commit"] == "bbbbbbbbbbbb+modified"


# ---- attnrepro train: ids of another tokenizer, and two writers into one folder ---------------------


def test_train_refuses_ids_of_another_tokenizer_naming_the_file(tmp_path, tiny_corpus):
    """The training data encoded with a tokenizer of 200 pieces, trained with one of 120: before, an IndexError
    (index out of range in self) with a traceback."""
    big = _config(tmp_path, lambda raw: raw["tokenizers"]["spm"].update(vocab_size=200))
    data = tiny_corpus / "data"
    made = attnrepro("tokenizer", "--config", str(big), "--name", "spm", "--src", str(data / "train.src"), "--tgt",
                     str(data / "train.tgt"), "--out-dir", str(tmp_path / "big"))  # fmt: skip
    assert made.returncode == 0, made.stderr
    encoded = attnrepro("encode", "--config", str(big), "--name", "spm", "--tokenizer-dir", str(tmp_path / "big"),
                        "--src", str(data / "train.src"), "--tgt", str(data / "train.tgt"), "--out",
                        str(tmp_path / "train.npz"))  # fmt: skip
    assert encoded.returncode == 0, encoded.stderr
    out = attnrepro("train", "--config", str(TEST_YAML), "--model", "rnnsearch10", "--tokenizer-dir",
                    str(tiny_corpus / "tokenizer"), "--train", str(tmp_path / "train.npz"), "--valid",
                    str(tiny_corpus / "encoded/valid.npz"), "--out-dir", str(tmp_path / "run"),
                    "--no-progress")  # fmt: skip
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert len(out.stderr.splitlines()) == 1
    line = re.fullmatch(
        rf"attnrepro train: error: {tmp_path / 'train.npz'}: (source|target) id (\d+) in sentence \d+ \(ids up to "
        rf"\d+\), but the tokenizer in {tiny_corpus / 'tokenizer'} has 120 \1 entries \(ids 0–119\): it was encoded "
        r"with another tokenizer; encode it with this one\n",
        out.stderr,
    )
    assert line and int(line.group(2)) >= 120, out.stderr
    assert not (tmp_path / "run/checkpoint.pt").exists()


def test_train_refuses_a_corpus_encoded_by_another_tokenizer_of_the_same_sizes(tmp_path, tiny_corpus):
    """A tokenizer of the same sizes learnt from the first half of the training text: every id is inside the
    vocabulary, so the ids check cannot see it; before, the model trained on other pieces than the tokenizer
    decodes, without a word. The .npz says which tokenizer encoded it (its files' sha256), and train checks it
    against --tokenizer-dir."""
    data, half = tiny_corpus / "data", tmp_path / "half"
    half.mkdir()
    for side in ("src", "tgt"):
        lines = (data / f"train.{side}").read_text(encoding="utf-8").splitlines(keepends=True)
        (half / f"train.{side}").write_text("".join(lines[: len(lines) // 2]), encoding="utf-8")
    made = attnrepro("tokenizer", "--config", str(TEST_YAML), "--name", "spm", "--src", str(half / "train.src"),
                     "--tgt", str(half / "train.tgt"), "--out-dir", str(half))  # fmt: skip
    assert made.returncode == 0, made.stderr
    spec = load_config(TEST_YAML).tokenizer
    sizes = [
        len(load_tokenizer(spec, d / f"{side}.model"))
        for d in (half, tiny_corpus / "tokenizer")
        for side in ("src", "tgt")
    ]
    assert sizes[:2] == sizes[2:], sizes  # the same sizes: only the stamp can tell them apart
    for split, tok_dir in (("train", half), ("valid", tiny_corpus / "tokenizer")):
        encoded = attnrepro("encode", "--config", str(TEST_YAML), "--name", "spm", "--tokenizer-dir", str(tok_dir),
                            "--src", str(data / f"{split}.src"), "--tgt", str(data / f"{split}.tgt"), "--out",
                            str(tmp_path / f"{split}.npz"))  # fmt: skip
        assert encoded.returncode == 0, encoded.stderr
    here, other = tokenizer_fingerprint(tiny_corpus / "tokenizer"), tokenizer_fingerprint(half)
    assert Corpus.load(tmp_path / "train.npz").tokenizer == {k: other[k] for k in ("src.model", "tgt.model")}
    train = ["train", "--config", str(TEST_YAML), "--model", "rnnsearch10", "--tokenizer-dir",
             str(tiny_corpus / "tokenizer"), "--valid", str(tmp_path / "valid.npz"), "--no-progress"]  # fmt: skip
    out = attnrepro(*train, "--train", str(tmp_path / "train.npz"), "--out-dir", str(tmp_path / "run"))
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr == (
        f"attnrepro train: error: {tmp_path / 'train.npz'}: encoded with a tokenizer whose src.model and tgt.model "
        f"sha256 are {other['src.model']}, {other['tgt.model']}, but the tokenizer in {tiny_corpus / 'tokenizer'} "
        f"has {here['src.model']}, {here['tgt.model']}: encode it with this one\n"
    )
    assert not (tmp_path / "run/checkpoint.pt").exists()


def _train_command(config: Path, corpus: Path, out_dir: Path) -> list[str]:
    return [sys.executable, "-m", "attnrepro.cli", "train", "--config", str(config), "--model", "rnnsearch10",
            "--tokenizer-dir", str(corpus / "tokenizer"), "--train", str(corpus / "encoded/train.npz"), "--valid",
            str(corpus / "encoded/valid.npz"), "--out-dir", str(out_dir), "--no-progress"]  # fmt: skip


def test_a_second_training_into_the_same_folder_stops_at_once_naming_the_first(tmp_path, tiny_corpus):
    """Before: the second said "resuming from step N" while the first was still writing, and train_log.csv ended
    with more rows than steps."""
    import signal
    import time

    config = _one_model(tmp_path, max_steps=100_000, checkpoint_every=10)
    out_dir = tmp_path / "run"
    first_log = (tmp_path / "first.log").open("w")
    first = subprocess.Popen(_train_command(config, tiny_corpus, out_dir), stdout=first_log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while "parameters, on" not in (tmp_path / "first.log").read_text() and time.monotonic() < deadline:
            time.sleep(0.1)  # "rnnsearch10: rnnsearch, N parameters, on cpu": set up, training starts
        assert first.poll() is None, (tmp_path / "first.log").read_text()
        started = time.monotonic()
        second = subprocess.run(_train_command(config, tiny_corpus, out_dir), capture_output=True, text=True,
                                timeout=120)  # fmt: skip
        assert time.monotonic() - started < 60
        assert (second.returncode, second.stdout) == (1, ""), second.stdout[-2000:]
        assert re.fullmatch(
            rf"attnrepro train: error: {out_dir / 'train.lock'}: another `attnrepro train` writes this folder \(pid "
            rf"{first.pid} on [^,]+, model rnnsearch10, since [\d-]+ [\d:]+\); wait for it to end, or train into "
            r"another --out-dir\n",
            second.stderr,
        ), second.stderr
        while not (out_dir / "resume/last.pt").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        first.send_signal(signal.SIGTERM)  # the first checkpoints and stops; the folder is free again
        assert first.wait(timeout=120) == 75, (tmp_path / "first.log").read_text()[-2000:]
    finally:
        first.kill()
        first_log.close()
    steps = pd.read_csv(out_dir / "resume/train_log.csv")["step"]
    assert steps.is_unique and steps.is_monotonic_increasing
    again = subprocess.run(_train_command(_one_model(tmp_path, "again", max_steps=int(steps.iloc[-1]) + 10,
                                                     checkpoint_every=10), tiny_corpus, out_dir),
                           capture_output=True, text=True, timeout=600)  # fmt: skip
    assert again.returncode == 0, again.stderr[-2000:]
    assert "resuming rnnsearch10 from step" in again.stdout


# ---- snakemake: a command that can never start ---------------------------------------------------


@pytest.mark.parametrize("flag", ["--cores", "--jobs"])
def test_snakemake_with_no_cores_stops_at_once_in_one_line(tmp_path, flag):
    """Before: "Provided cores: 0", then "Select jobs to execute..." until killed (9 minutes in the issue)."""
    out = snakemake(tmp_path / "work", TEST_YAML, flag, "0", timeout=120)
    assert out.returncode == 1
    assert out.stderr.splitlines()[-1] == ("--cores 0 (or --jobs 0): no job can start without a core; give --cores N "
                                           "with N >= 1, or --cores all")  # fmt: skip
    assert "Select jobs to execute" not in out.stdout + out.stderr
    assert not (tmp_path / "work/results").exists()
