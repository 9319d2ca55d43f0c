"""Numbers that never lie (issue 39), through the commands a user types (`snakemake`, `attnrepro`): a check
that says what it did not check, a translation that refuses the wrong checkpoint, a config that refuses a
number that means nothing, a failed or diverged run that says so in one line. Each asserts the exit status,
the one line, and that nothing under results/ was lost or silently changed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from test_user_errors import RESULTS, TEST_YAML, attnrepro, snapshot

from attnrepro.config.constraints import RESERVED_NAMES, RESULT_FOLDERS, RULE_NAMES

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
