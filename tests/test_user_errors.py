"""A user's mistakes, through the commands a user types (`snakemake`, `attnrepro`): each is one line
naming what to fix, and nothing under results/ is lost or silently changed.

Duplicate keys in a config or overlay, a missing file argument, Ctrl-C (to the process group or to
Snakemake alone), a target after --configfile (tests/test_readme.py), pins beside the config that
names the downloads, a missing mirror folder, and the parameter count of `attnrepro params`.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from archive_server import ArchiveServer

from attnrepro.training.checkpoint import load_checkpoint
from attnrepro.training.launch import PREEMPTED_EXIT_CODE

from conftest import REPO, snakemake

TEST_YAML = REPO / "config" / "test.yaml"
MULTI30K = REPO / "config" / "multi30k_en_de.yaml"
RESULTS = "results/synthetic_test"


def attnrepro(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The console script as a user runs it."""
    return subprocess.run([sys.executable, "-m", "attnrepro.cli", *args], cwd=cwd, capture_output=True, text=True)


def snapshot(workdir: Path) -> dict[str, str]:
    """sha256 of every file under workdir/results."""
    root = workdir / "results"
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


# ---- 1. a key given twice -------------------------------------------------------------------------


def duplicated_model(tmp_path: Path) -> tuple[Path, int, int]:
    """config/test.yaml with rnnencdec20's block copied at the end of `models:` and its name not changed
    to a new one but to rnnsearch10's: (the file, the first rnnsearch10's line, the copy's line)."""
    text = TEST_YAML.read_text()
    block = text[text.index("  rnnencdec20:") : text.index("  rnnsearch10:")]
    end = text.index("\nsearch:")
    text = text[:end] + "\n" + block.replace("rnnencdec20", "rnnsearch10") + text[end:]
    path = tmp_path / "copied_block.yaml"
    path.write_text(text)
    first, copy = [i + 1 for i, line in enumerate(text.splitlines()) if line == "  rnnsearch10:"]
    return path, first, copy


def test_a_model_given_twice_is_one_line_naming_the_file_and_both_lines(tmp_path):
    config, first, copy = duplicated_model(tmp_path)
    out = attnrepro("params", "--config", str(config), "--model", "rnnsearch10")
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.splitlines() == [
        f"attnrepro params: error: {config}:{copy}: models.rnnsearch10 is given twice (lines {first} and {copy}); "
        "YAML would keep only the second: rename or remove one"
    ]


def test_keys_a_merge_brings_in_are_overridden_not_duplicated(tmp_path):
    """`train: {<<: *train, max_src_len: 10}` is config/test.yaml's own idiom: an override, not a duplicate."""
    config = tmp_path / "merge.yaml"
    config.write_text(TEST_YAML.read_text().replace("max_src_len: 10}", "max_src_len: 10, max_steps: 7}"))
    out = attnrepro("params", "--config", str(config), "--model", "rnnsearch10")
    assert out.returncode == 0, out.stderr
    from attnrepro.config import load_config

    assert load_config(config).model("rnnsearch10").train.max_steps == 7


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A workdir where config/test.yaml's rnnsearch10 was trained (and its data made) by Snakemake."""
    workdir = tmp_path_factory.mktemp("trained")
    out = snakemake(workdir, TEST_YAML, "--cores", "2", f"{RESULTS}/rnnsearch10/checkpoint.pt")
    assert out.returncode == 0, out.stderr[-3000:]
    return workdir


def _search_twice(tmp_path: Path) -> tuple[list[Path], str]:
    text = TEST_YAML.read_text() + "\nsearch:\n  beam: 12\n"
    (tmp_path / "search_twice.yaml").write_text(text)
    lines = [i + 1 for i, line in enumerate(text.splitlines()) if line == "search:"]
    return [tmp_path / "search_twice.yaml"], f"search_twice.yaml:{lines[1]}: search is given twice (lines {lines[0]}"


def _model_twice(tmp_path: Path) -> tuple[list[Path], str]:
    config, first, copy = duplicated_model(tmp_path)
    return [config], f"copied_block.yaml:{copy}: models.rnnsearch10 is given twice (lines {first} and {copy})"


def _overlay_key_twice(tmp_path: Path) -> tuple[list[Path], str]:
    overlay = tmp_path / "overlays" / "beam.yaml"
    overlay.parent.mkdir()
    overlay.write_text("search:\n  beam: 4\n  batch_size: 8\n  beam: 6\n")
    return [TEST_YAML, overlay], "beam.yaml:4: search.beam is given twice (lines 2 and 4)"


@pytest.mark.slow
@pytest.mark.parametrize("case", [_model_twice, _search_twice, _overlay_key_twice], ids=lambda f: f.__name__[1:])
def test_a_key_given_twice_stops_snakemake_before_any_job_and_changes_nothing(trained, tmp_path, case):
    configs, message = case(tmp_path)
    before = snapshot(trained)
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "-d", str(trained)]
    for args in (["-n"], ["--cores", "1"]):
        out = subprocess.run(command + [*args, "--configfile", *map(str, configs)], capture_output=True, text=True)
        assert out.returncode != 0
        assert message in out.stdout + out.stderr
    assert snapshot(trained) == before


# ---- 2. a missing file argument -------------------------------------------------------------------

SOME_FILE = str(REPO / "README.md")  # an existing file for the arguments a case does not test


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["train", "--model", "rnnsearch10", "--tokenizer-dir", "{tokenizer}", "--train", "missing.npz",
             "--valid", SOME_FILE, "--out-dir", "out"],
            "attnrepro train: error: --train missing.npz: no such file or folder",
        ),
        (
            ["translate", "--model", "rnnsearch10", "--checkpoint", "missing.pt", "--tokenizer-dir", "{tokenizer}",
             "--src", SOME_FILE, "--ref", SOME_FILE, "--out", "h", "--attention", "a", "--out-no-unk", "n"],
            "attnrepro translate: error: --checkpoint missing.pt: no such file or folder",
        ),
        (
            ["score", "--model", "rnnsearch10", "--src", SOME_FILE, "--hyp", "missing.txt", "--hyp-no-unk", SOME_FILE,
             "--ref", SOME_FILE, "--json", "j", "--csv", "c"],
            "attnrepro score: error: --hyp missing.txt: no such file or folder",
        ),
        (
            ["train", "--model", "rnnsearch10", "--tokenizer-dir", "empty", "--train", SOME_FILE,
             "--valid", SOME_FILE, "--out-dir", "out"],
            "attnrepro train: error: --tokenizer-dir empty: has no src.model or tgt.model (what the tokenizer rule "
            "writes)",
        ),
        (
            ["average", "--model", "rnnsearch10", "--checkpoint", "missing/checkpoint.pt", "--out", "a.pt"],
            "attnrepro average: error: --checkpoint missing/checkpoint.pt: no such file or folder",
        ),
    ],
    ids=["train --train", "translate --checkpoint", "score --hyp", "train --tokenizer-dir", "average --checkpoint"],
)  # fmt: skip
def test_a_missing_file_argument_is_one_line_naming_the_argument_and_the_path(tmp_path, args, line):
    tokenizer = tmp_path / "tokenizer"
    tokenizer.mkdir()
    for name in ("src.model", "tgt.model"):
        (tokenizer / name).write_text("")  # present: the case is about another argument
    (tmp_path / "empty").mkdir()
    args = [a.replace("{tokenizer}", str(tokenizer)) for a in args]
    out = attnrepro(args[0], "--config", str(TEST_YAML), *args[1:], cwd=tmp_path)
    assert (out.returncode, out.stderr.splitlines(), out.stdout) == (1, [line], "")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "tokenizer"]  # nothing written


def test_every_verb_checks_its_file_arguments_before_it_runs():
    """Every argument of every verb that names a file or folder to read is declared as one (add_input)."""
    from attnrepro.cli import build_parser

    reads = {"--src-input", "--tgt-input", "--raw-dir", "--tokenizer-dir", "--train", "--valid", "--checkpoint",
             "--hyp", "--hyp-no-unk", "--ref", "--results"}  # fmt: skip
    # names that other verbs write: extract's --src/--tgt, translate's --attention
    also = {"tokenizer": {"--src", "--tgt"}, "encode": {"--src", "--tgt"}, "translate": {"--src"}, "score": {"--src"},
            "figure-alignments": {"--src", "--attention"}}  # fmt: skip
    verbs = build_parser()._subparsers._group_actions[0].choices  # argparse keeps its sub-parsers here
    for name, verb in verbs.items():
        checked = {flag for flag, _, _ in verb.get_default("inputs")}
        flags = {flag for action in verb._actions for flag in action.option_strings}
        expected = reads | also.get(name, set())
        assert flags & expected <= checked, name


# ---- 3. Ctrl-C ------------------------------------------------------------------------------------


def _long_training(tmp_path: Path) -> Path:
    """config/test.yaml's rnnsearch10 alone, for 2000 updates with no regular checkpoint before the end."""
    raw = yaml.safe_load(TEST_YAML.read_text())
    raw["models"] = {"rnnsearch10": raw["models"]["rnnsearch10"]}
    raw["models"]["rnnsearch10"]["train"].update(max_steps=2000, checkpoint_every=2000, valid_every=2000)
    config = tmp_path / "long.yaml"
    config.write_text(yaml.safe_dump(raw))
    return config


@pytest.mark.slow
@pytest.mark.parametrize("to", ["process group", "snakemake alone"])
def test_ctrl_c_checkpoints_the_update_under_way_and_the_same_command_resumes(tmp_path, to):
    """Ctrl-C in a terminal signals the whole process group; `kill -INT` reaches Snakemake alone, which
    used to let training run to its end and then count the job as failed. Both stop the training within an
    update, with its checkpoint, and without a traceback; the rerun resumes from that update."""
    config, workdir = _long_training(tmp_path), tmp_path / "work"
    target = f"{RESULTS}/rnnsearch10/checkpoint.pt"
    command = [sys.executable, "-m", "snakemake", target, "--snakefile", str(REPO / "Snakefile"), "-d", str(workdir)]
    command += ["--cores", "1", "--configfile", str(config)]
    proc = subprocess.Popen(
        command, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    log = workdir / RESULTS / "logs/train_rnnsearch10.log"
    deadline = time.monotonic() + 300
    while not (log.exists() and "parameters" in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)  # "N parameters" comes right before the first update
    time.sleep(1)
    made = ("synthetic_test/data/", "synthetic_test/tokenizer/", "synthetic_test/encoded/", "synthetic_test/config")
    before = {k: v for k, v in snapshot(workdir).items() if k.startswith(made)}
    assert len(before) > 10
    if to == "process group":
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    else:
        proc.send_signal(signal.SIGINT)
    output = proc.communicate(timeout=120)[0]
    assert proc.returncode != 0, output[-3000:]
    train_log = log.read_text()
    assert "Traceback" not in train_log and "KeyboardInterrupt" not in train_log, train_log[-3000:]
    # Both ways signal the trainer itself (Ctrl-C through the process group, `kill -INT` through Snakemake's
    # handler, which signals every process it started) and, through its launcher, as SIGTERM: whichever
    # comes first is named, once (CI at 367e385 saw SIGTERM first with Snakemake alone).
    assert len(re.findall("received SIG(INT|TERM): checkpointing at the end of this update", train_log)) == 1
    assert f"attnrepro launch: stopped by SIGINT (exit status {PREEMPTED_EXIT_CODE}); checkpoint kept" in train_log
    step = load_checkpoint(workdir / RESULTS / "rnnsearch10/resume/last.pt")["step"]
    assert 0 < step < 2000 and f"stopped by a signal after step {step};" in train_log  # every update kept
    assert not (workdir / RESULTS / "rnnsearch10/checkpoint.pt").exists()

    rerun = subprocess.run(command, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"resuming rnnsearch10 from step {step} " in log.read_text()
    assert load_checkpoint(workdir / RESULTS / "rnnsearch10/checkpoint.pt")["stopped_at"] == 2000
    after = snapshot(workdir)
    assert {k: after[k] for k in before} == before  # data, tokenizer, encoded: untouched
    done = subprocess.run(command + ["-n"], capture_output=True, text=True)
    assert "Nothing to be done" in done.stdout + done.stderr


def _foreground_ctrl_c() -> None:
    """The child takes Ctrl-C as a foreground job does, even where pytest itself was started in the background
    (`cmd &` starts with SIGINT ignored, and an ignored signal stays ignored across exec)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
def test_ctrl_c_of_a_verb_outside_training_is_one_line_and_the_shells_status(tmp_path):
    """`attnrepro generate` of the embedded corpus (150 000 pairs, seconds) interrupted mid-way."""
    out_dir = tmp_path / "data"
    proc = subprocess.Popen(
        [sys.executable, "-m", "attnrepro.cli", "generate", "--config", str(REPO / "config/config.yaml"),
         "--out-dir", str(out_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_foreground_ctrl_c,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not out_dir.exists() and time.monotonic() < deadline:
        time.sleep(0.01)  # write_splits makes its folder first
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert (proc.returncode, stderr.splitlines()) == (
        130,
        ["attnrepro generate: interrupted; its outputs are not complete"],
    )


# ---- 5. pins beside the config that names the downloads; 6. the mirror folder ---------------------


def _served_multi30k(tmp_path: Path, server: ArchiveServer, val_en: bytes) -> Path:
    """config/multi30k_en_de.yaml served from 127.0.0.1, with val.en.gz published without size or checksums."""
    raw = yaml.safe_load(MULTI30K.read_text())
    for key, spec in raw["data"]["wmt"]["files"].items():
        path = "/" + spec["url"].rsplit("/", 1)[1]
        spec["url"] = server.add(path, val_en if key == "val_en" else b"not served")
    raw["data"]["wmt"]["files"]["val_en"] = {"url": raw["data"]["wmt"]["files"]["val_en"]["url"]}
    raw["data"]["wmt"]["retries"] = 0
    config = tmp_path / "config" / "multi30k_en_de.yaml"
    config.parent.mkdir()
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    return config


@pytest.mark.slow
def test_pins_stay_beside_the_config_naming_the_files_when_an_overlay_is_given(tmp_path):
    overlay = tmp_path / "config" / "overlays" / "one_seed.yaml"
    target = "results/downloads/multi30k/val.en.gz"
    with ArchiveServer() as server:
        config = _served_multi30k(tmp_path, server, b"the published file\n")
        overlay.parent.mkdir()
        overlay.write_text("seeds: [1]\n")
        first = snakemake(tmp_path / "work", config, "--cores", "1", target)
        assert first.returncode == 0, first.stderr[-3000:]
        lock = config.with_name("multi30k_en_de.lock.yaml")
        pinned = lock.read_text()
        assert "val_en" in pinned

        # The publisher changes the file; the same download with an overlay must hold it to the pin.
        server.files["/val.en.gz"] = b"THE PUBLISHED FILE\n"  # as long, other bytes
        (tmp_path / "work" / target).unlink()
        again = snakemake(tmp_path / "work", config, str(overlay), "--cores", "1", target)
    assert again.returncode != 0
    download_log = (tmp_path / "work/results/multi30k_en_de/logs/download_val.en.gz.log").read_text()
    assert str(lock) in download_log and "sha256" in download_log, download_log
    assert lock.read_text() == pinned and not overlay.with_name("one_seed.lock.yaml").exists()
    assert not (tmp_path / "work" / target).exists()


def test_a_missing_mirror_folder_stops_the_dry_run_naming_it(tmp_path):
    overlay = tmp_path / "mirror.yaml"
    overlay.write_text(f"data:\n  wmt:\n    mirror: {tmp_path / 'no_such_folder'}\n")
    out = snakemake(tmp_path / "work", MULTI30K, str(overlay), "-n")
    assert out.returncode != 0
    assert f"data.wmt.mirror: {tmp_path / 'no_such_folder'} is not a folder" in out.stdout + out.stderr
    assert not (tmp_path / "work" / "results").exists()


# ---- 7. attnrepro params counts what training counts ----------------------------------------------


@pytest.mark.slow
def test_params_counts_the_trained_tokenizer_as_training_does_and_says_so(trained, tmp_path):
    logged = re.search(
        r"rnnsearch10: rnnsearch, ([\d,]+) parameters", (trained / RESULTS / "logs/train_rnnsearch10.log").read_text()
    )
    out = attnrepro("params", "--config", str(TEST_YAML), "--model", "rnnsearch10", cwd=trained)
    assert out.returncode == 0, out.stderr
    first, count = out.stdout.splitlines()
    assert int(count) == int(logged[1].replace(",", ""))
    assert first.endswith(f"(the trained tokenizer in {RESULTS}/tokenizer/spm)")

    nominal = attnrepro("params", "--config", str(TEST_YAML), "--model", "rnnsearch10", cwd=tmp_path)
    first, count = nominal.stdout.splitlines()
    assert "source vocabulary 120, target vocabulary 120 (nominal, from tokenizers.spm: no trained tokenizer" in first
    assert int(count) != int(logged[1].replace(",", ""))


# ---- found beside them ----------------------------------------------------------------------------


def test_a_mistyped_key_stops_snakemake_with_its_path_not_the_schema(tmp_path):
    """Snakemake's own validate printed the JSON schema around the violation: 197 lines for one typo."""
    config = tmp_path / "typo.yaml"
    config.write_text(TEST_YAML.read_text().replace("max_steps: 20", "max_stpes: 20"))
    out = snakemake(tmp_path / "work", config, "-n")
    assert out.returncode != 0
    # the typo is in the x-train anchor that both models merge: jsonschema names either, from run to run
    line = r"^models\.(rnnencdec20|rnnsearch10)\.train: Additional properties are not allowed "
    line += r"\('max_stpes' was unexpected\)$"
    assert re.search(line, out.stdout, flags=re.MULTILINE), out.stdout
    assert len((out.stdout + out.stderr).splitlines()) < 15
    assert not (tmp_path / "work" / "results").exists()
