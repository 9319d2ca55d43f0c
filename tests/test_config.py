"""Configuration: the schema rejects what a user can mistype, naming the key; dataclasses carry the rest."""

from __future__ import annotations

import copy
import subprocess
import sys
from dataclasses import replace

import pytest
import yaml

from attnrepro.config import Config, ConfigError, from_dict, load_config
from attnrepro.models import REGISTRY

from conftest import REPO


def _raw() -> dict:
    """config/config.yaml's keys with one run per model (without its `seeds`): the models under their own names."""
    raw = yaml.safe_load((REPO / "config/config.yaml").read_text())
    del raw["seeds"]
    return raw


def test_shipped_configs_load_with_defaults_filled():
    cfg = load_config(REPO / "config/config.yaml")
    assert {m.base for m in cfg.models.values()} == set(_raw()["models"])
    assert {m.arch for m in cfg.models.values()} == set(REGISTRY)  # every family of the history is trained
    assert {"rnnencdec30", "rnnencdec50", "rnnsearch30", "rnnsearch50"} <= set(_raw()["models"])  # Bahdanau's Fig. 2
    assert cfg.models["transformer_seed1"].train.schedule == "inverse_sqrt"
    assert cfg.models["rnnsearch30_seed2"].train.max_src_len == 30
    assert cfg.models["rnnsearch50_seed3"].train.rho == 0.95  # schema default: Bahdanau's Adadelta rho
    assert cfg.models["rnnsearch50_seed1"].label == "RNNsearch-50"
    assert cfg.search.beam == 5
    test = load_config(REPO / "config/test.yaml")
    assert test.tokenizer.kind == "spm"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda c: c["models"]["rnnsearch50"]["params"].update(hiden=3), "hiden"),
        (lambda c: c["models"]["rnnsearch50"]["train"].update(lr="fast"), "fast"),
        (lambda c: c["models"]["rnnsearch50"]["train"].update(max_steps=0), "max_steps"),
        (lambda c: c["models"]["rnnsearch50"].update(arch="lstm"), "lstm"),
        (lambda c: c.update(serach={}), "serach"),
        (lambda c: c["tokenizers"]["word"].update(kind="bpe"), "bpe"),
        (lambda c: c["models"]["rnnencdec30"]["params"].update(align=10), "align"),  # rnnenc has no alignment model
        (lambda c: c["models"]["rnnencdec30"]["resources"].update(priority=-1), "priority"),  # ILP would idle a core
    ],
)
def test_schema_rejects_bad_values_naming_the_key(edit, message):
    raw = _raw()
    edit(raw)
    with pytest.raises(Exception) as info:
        from_dict(raw)
    text = str(info.value) + "".join(str(a) for a in getattr(info.value, "args", ()))
    assert message in text


def test_semantic_check_names_the_key():
    raw = _raw()
    raw["models"]["rnnsearch50"]["train"]["max_src_len"] = 60
    with pytest.raises(ConfigError, match=r"models.rnnsearch50.train.max_src_len=60"):
        from_dict(raw)


def test_from_dict_does_not_mutate_its_input():
    raw = _raw()
    before = copy.deepcopy(raw)
    from_dict(raw)
    assert raw == before


def test_snakemake_dry_run_stops_on_a_mistyped_key(tmp_path):
    raw = _raw()
    raw["models"]["rnnsearch50"]["train"]["max_stpes"] = 10
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(raw))
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--configfile", str(bad), "--directory", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode != 0
    assert "max_stpes" in out.stdout + out.stderr
    assert not (tmp_path / "results").exists()  # nothing was planned or written


def test_wmt_configs_carry_the_papers_settings():
    fr = load_config(REPO / "config/wmt14_en_fr.yaml")
    assert (fr.wmt.src_lang, fr.wmt.tgt_lang) == ("en", "fr")
    assert fr.wmt.files["un"].size == 2365634246 and fr.wmt.files["un"].name == "training-parallel-un.tgz"
    assert fr.wmt.files["test_full"].md5 == "a8cd784e006feb32ac6f3d9ec7eb389a"
    assert fr.wmt.files["bitexts"].sha256 is None  # nothing published: pinned in the lock file
    assert fr.tokenizer_of("rnnsearch50").vocab_size == 30000 and fr.tokenizer_of("rnnsearch50").pretokenize == "moses"
    s2s = fr.tokenizer_of("seq2seq")
    assert (s2s.side_vocab_size("src"), s2s.side_vocab_size("tgt")) == (160000, 80000)
    assert fr.tokenizer_of("transformer_base").vocab_size == 32000 and fr.tokenizer_of("transformer_base").shared
    r50 = fr.model("rnnsearch50")
    assert r50.params == {"emb": 620, "hidden": 1000, "align": 1000, "maxout": 500, "init": "paper", "dropout": 0.0}
    assert (r50.train.optimizer, r50.train.rho, r50.train.eps, r50.train.clip_norm) == ("adadelta", 0.95, 1e-6, 1.0)
    assert fr.model("rnnencdec30").train.max_src_len == 30 and r50.train.max_src_len == 50
    seq = fr.model("seq2seq")
    assert (seq.train.optimizer, seq.train.lr, seq.train.schedule, seq.train.clip_norm) == ("sgd", 0.7, "halving", 5.0)
    assert seq.params["layers"] == 4 and fr.search_of("seq2seq").beam == 12
    big = fr.model("transformer_big")
    assert big.params["d_model"] == 1024 and big.params["dropout"] == 0.1  # 0.1 for En-Fr (Vaswani 6.1)
    assert (big.train.betas, big.train.eps, big.train.warmup_steps) == ((0.9, 0.98), 1e-9, 4000)
    vaswani_search = replace(fr.search, beam=4, length_penalty=0.6, max_len_a=1.0, max_len_b=50)  # Vaswani 6.1
    assert fr.search_of("transformer_base") == vaswani_search
    de = load_config(REPO / "config/wmt14_en_de.yaml")
    assert de.tokenizer_of("transformer_big").vocab_size == 37000
    assert de.model("transformer_big").params["dropout"] == 0.3
    assert sum(de.wmt.corpora[c].lines for c in de.wmt.splits["train"]) == 4520620  # "about 4.5 million"
    for cfg in (fr, de):
        assert set(cfg.models) >= {"rnnencdec30", "rnnencdec50", "rnnsearch30", "rnnsearch50", "seq2seq"}
        assert {m.arch for m in cfg.models.values()} == set(REGISTRY)  # every arch at paper size


def test_the_only_tokenizer_is_the_default_and_several_need_naming():
    raw = _raw()
    assert from_dict(raw).model("rnnsearch50").tokenizer == "word"
    raw["tokenizers"]["spm"] = {"kind": "spm", "vocab_size": 100}
    with pytest.raises(ConfigError, match=r"models.rnnencdec30.tokenizer: required when there are several"):
        from_dict(raw)
    for m in raw["models"].values():
        m["tokenizer"] = "word"
    raw["models"]["rnnsearch50"]["tokenizer"] = "bpe"
    with pytest.raises(ConfigError, match=r"models.rnnsearch50.tokenizer: no tokenizer named 'bpe'"):
        from_dict(raw)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda w: w["corpora"]["un"].update(file="un2"), r"data.wmt.corpora.un.file: no file named 'un2'"),
        (lambda w: w["splits"]["train"].append("gigafren"), r"data.wmt.splits.train: no corpus named 'gigafren'"),
        (lambda w: w["splits"].pop("test"), "'test' is a required property"),
        (lambda w: w["files"]["dev"].update(sha256="xyz"), "xyz"),
        (lambda w: w["files"]["dev"].update(url="https://example.org/"), r"data.wmt.files.dev.url: .* no file name"),
        (lambda w: w["files"]["test_full"].update(name="dev.tgz"), r"data.wmt.files.test_full: file name 'dev.tgz'"),
    ],
)
def test_wmt_config_errors_name_the_key(edit, message):
    raw = yaml.safe_load((REPO / "config/wmt14_en_fr.yaml").read_text())
    edit(raw["data"]["wmt"])
    with pytest.raises(Exception, match=message):
        from_dict(raw)


def test_a_tokenizer_trains_on_a_training_split():
    raw = yaml.safe_load((REPO / "config/wmt14_en_fr.yaml").read_text())
    raw["tokenizers"]["word30k"]["train_split"] = "valid"
    with pytest.raises(ConfigError, match=r"tokenizers.word30k.train_split: 'valid' is not a training split"):
        from_dict(raw)


def test_seeds_make_one_run_per_model_and_seed():
    raw = _raw()
    raw["models"]["rnnsearch50"]["train"]["seed"] = 7
    plain = from_dict(raw)
    assert plain.models["rnnsearch50"].base == "rnnsearch50" and plain.models["rnnsearch50"].train.seed == 7
    raw["seeds"] = [1, 2, 3]
    cfg = from_dict(raw)
    assert list(cfg.models)[:3] == ["rnnencdec30_seed1", "rnnencdec30_seed2", "rnnencdec30_seed3"]
    assert len(cfg.models) == 3 * len(plain.models)
    for seed in (1, 2, 3):
        run = cfg.model(f"rnnsearch50_seed{seed}")
        assert (run.name, run.base, run.label, run.train.seed) == (
            f"rnnsearch50_seed{seed}", "rnnsearch50", "RNNsearch-50", seed,
        )  # fmt: skip
        assert (
            replace(run, name="rnnsearch50", base="rnnsearch50", train=replace(run.train, seed=7))
            == (plain.models["rnnsearch50"])
        )  # nothing else differs from the configured model


def test_seed_run_names_cannot_collide():
    raw = _raw()
    raw["models"] = {"a": raw["models"]["rnnsearch50"], "a_seed1": raw["models"]["rnnencdec30"]}
    raw["seeds"] = [1, 11]
    cfg = from_dict(raw)
    assert {name: (m.base, m.train.seed) for name, m in cfg.models.items()} == {
        "a_seed1": ("a", 1), "a_seed11": ("a", 11), "a_seed1_seed1": ("a_seed1", 1), "a_seed1_seed11": ("a_seed1", 11),
    }  # fmt: skip
    raw["seeds"] = [1, 2, 1]  # two runs named a_seed1
    with pytest.raises(Exception, match="non-unique") as info:
        from_dict(raw)
    assert "seeds" in str(info.value)


def test_checks_name_the_configured_model_not_its_seed_runs():
    raw = _raw()
    raw["seeds"] = [1, 2]
    raw["models"]["rnnsearch50"]["train"]["max_src_len"] = 60
    with pytest.raises(ConfigError, match=r"^models.rnnsearch50.train.max_src_len=60"):
        from_dict(raw)


def _wmt_raw() -> dict:
    return yaml.safe_load((REPO / "config/wmt14_en_fr.yaml").read_text())


@pytest.mark.parametrize(
    ("raw", "edit", "message"),
    [
        (_raw, lambda c: c["models"]["transformer"]["params"].update(heads=3),
         r"models\.transformer\.params\.heads=3 does not divide models\.transformer\.params\.d_model=128"),
        (_raw, lambda c: c["models"]["transformer"]["params"].update(share_embeddings=True),
         r"models\.transformer\.params\.share_embeddings needs tokenizers\.word\.shared: true"),
        (_raw, lambda c: c["models"]["memnet"]["params"].update(max_positions=79),
         r"models\.memnet\.params\.max_positions=79 is shorter .*\(data\.synthetic\.max_test_len=80\)"),
        (_wmt_raw, lambda c: c["models"]["memnet50"]["params"].update(max_positions=49),
         r"models\.memnet50\.params\.max_positions=49 is shorter .*\(models\.memnet50\.train\.max_src_len=50\)"),
        (_raw, lambda c: c["models"]["rnnsearch50"]["train"].update(schedule="inverse_sqrt"),
         r"models\.rnnsearch50\.train\.schedule: inverse_sqrt needs a d_model; arch rnnsearch has none"),
        (_raw, lambda c: c["models"]["rnnsearch50"]["train"].update(update_tokens=999),
         r"models\.rnnsearch50\.train\.update_tokens=999 is less than one batch \(.*batch_tokens=2000\)"),
        (_raw, lambda c: c["models"]["rnnsearch50"]["train"].update(average_last=3, max_steps=2000, patience=0,
                                                                    plateau_decays=0),
         r"models\.rnnsearch50\.train\.average_last=3 exceeds the 2 checkpoints"),
        (_raw, lambda c: c["search"].update(max_len_a=0, max_len_b=0),
         r"^search\.max_len_a=0 and max_len_b=0 allow no word before </s>"),
        (_raw, lambda c: c["models"]["rnnsearch50"].update(search={"max_len_a": 0.5, "max_len_b": 0}),
         r"models\.rnnsearch50\.search\.max_len_a=0\.5 and max_len_b=0 allow no word"),
        (_wmt_raw, lambda c: c["data"]["wmt"]["clean"].update(min_len=81),
         r"data\.wmt\.clean\.min_len=81 exceeds data\.wmt\.clean\.max_len=80"),
    ],
)  # fmt: skip
def test_keys_that_cannot_work_together_stop_before_any_job(raw, edit, message):
    """Each of these passed validation and failed inside a job (or silently did something else)."""
    config = raw()
    edit(config)
    with pytest.raises(ConfigError, match=message):
        from_dict(config)


def test_the_boundaries_of_those_constraints_are_valid():
    raw = _raw()
    raw["models"]["transformer"]["params"].update(heads=8)  # d_k = 16
    raw["models"]["memnet"]["params"].update(max_positions=80)  # the longest test sentence exactly
    raw["models"]["rnnsearch50"]["train"].update(
        update_tokens=2000, average_last=2, max_steps=2000, patience=0, plateau_decays=0
    )
    raw["search"].update(max_len_a=1, max_len_b=0)  # one word for a one-word source
    cfg = from_dict(raw)
    assert cfg.model("transformer").params["heads"] == 8 and cfg.search_of("seq2seq").max_len_a == 1


def test_a_schema_violation_is_a_config_error_naming_the_key_on_one_line():
    raw = _raw()
    raw["models"]["rnnsearch50"]["train"]["lr"] = "fast"
    with pytest.raises(ConfigError) as info:
        from_dict(raw)
    assert str(info.value) == "models.rnnsearch50.train.lr: 'fast' is not of type 'number'"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, r"missing\.yaml: no such config file$"),
        ("dataset: x\n  data: y\n", r"bad\.yaml:2: not valid YAML: mapping values are not allowed here$"),
        ("- a list\n", r"bad\.yaml: expected a mapping at the top level$"),
    ],
)
def test_a_config_file_that_cannot_be_read_is_named(tmp_path, text, message):
    path = tmp_path / ("missing.yaml" if text is None else "bad.yaml")
    if text is not None:
        path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(path)


def test_snakemake_dry_run_stops_on_keys_that_cannot_work_together(tmp_path):
    raw = _raw()
    raw["models"]["transformer"]["params"]["heads"] = 3
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(raw))
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--configfile", str(bad), "--directory", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode != 0
    assert "models.transformer.params.heads=3 does not divide models.transformer.params.d_model=128" in out.stdout
    assert not (tmp_path / "results").exists()


def _overlaid(name: str) -> tuple[Config, Config]:
    """config/overlays/NAME merged over config/config.yaml as Snakemake merges them, and the default alone."""
    from snakemake.utils import update_config

    default = yaml.safe_load((REPO / "config/config.yaml").read_text())
    merged = copy.deepcopy(default)
    update_config(merged, yaml.safe_load((REPO / "config/overlays" / name).read_text()))
    return from_dict(merged), from_dict(default)


def test_the_clause_reversal_stress_config_is_the_default_with_reversed_clauses():
    cfg, base = _overlaid("clause_reverse.yaml")
    assert (cfg.dataset, cfg.synthetic.clause_order, base.synthetic.clause_order) == (
        "synthetic_reverse", "reverse", "keep",
    )  # fmt: skip
    assert replace(cfg, dataset=base.dataset, synthetic=replace(cfg.synthetic, clause_order="keep")) == base


def test_the_default_trains_every_model_with_three_seeds_and_the_overlay_with_three_others():
    default = load_config(REPO / "config/config.yaml")
    runs = {(m.base, m.train.seed) for m in default.models.values()}
    bases = sorted({base for base, _ in runs})
    assert runs == {(base, seed) for base in bases for seed in (1, 2, 3)} and bases == sorted(_raw()["models"])
    cfg, base = _overlaid("seeds_4_6.yaml")
    assert cfg.dataset == "synthetic_seeds_4_6" and cfg.synthetic == base.synthetic
    assert sorted(cfg.models) == sorted(f"{b}_seed{s}" for b in bases for s in (4, 5, 6))
    for name, run in cfg.models.items():
        assert run.train.seed == int(name[-1]) and run.base == name.rsplit("_seed", 1)[0]
        assert replace(run.train, seed=1) == base.model(f"{run.base}_seed1").train


@pytest.mark.parametrize("arch", sorted(REGISTRY))
def test_every_arch_refuses_a_misspelt_param_in_one_line_naming_it_and_fills_the_registrys_defaults(arch):
    raw = _raw()
    raw["models"] = {"probe": {"arch": arch, "params": {"hiden": 3}}}
    with pytest.raises(ConfigError) as refused:
        from_dict(raw)
    assert str(refused.value) == "models.probe.params: Additional properties are not allowed ('hiden' was unexpected)"
    given = {"share_embeddings": False} if arch == "transformer" else {}  # the embedded default's vocabularies differ
    raw["models"] = {"probe": {"arch": arch, "params": dict(given)}}
    assert from_dict(raw).model("probe").params == REGISTRY[arch].defaults | given


def test_a_param_of_the_wrong_type_or_out_of_bounds_is_refused_naming_it():
    raw = _raw()
    for params, message in (
        ({"hidden": "big"}, "models.probe.params.hidden: 'big' is not of type 'integer'"),
        ({"dropout": 1.5}, "models.probe.params.dropout: 1.5 is greater than the maximum of 1"),
        ({"init": "xavier"}, "models.probe.params.init: 'xavier' is not one of ['paper', 'pytorch']"),
    ):
        raw["models"] = {"probe": {"arch": "transducer", "params": params}}
        with pytest.raises(ConfigError) as refused:
            from_dict(raw)
        assert str(refused.value) == message


def test_the_arch_is_checked_against_the_registry_the_one_list_of_archs():
    """A new model needs no schema edit: the schema says "a string", the registry says which."""
    raw = _raw()
    raw["models"]["rnnsearch50"]["arch"] = "rnnsaerch"
    with pytest.raises(ConfigError, match=r"models.rnnsearch50.arch: 'rnnsaerch' is not a registered arch \(rnnenc, "):
        from_dict(raw)
    schema = yaml.safe_load((REPO / "src/attnrepro/schemas/config.schema.yaml").read_text())
    assert "enum" not in schema["$defs"]["model"]["properties"]["arch"]
