"""Cross-key constraints of a parsed configuration: what the schema cannot say, checked before any job.

`config.from_dict` runs `check` on every config it builds, so `snakemake -n` stops on these like on
a mistyped key. Each check raises `ConfigError` naming the key to change and why; a value that
only works badly (e.g. `valid_every` > `max_steps`: training still validates and checkpoints at
its last step) is not an error.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from attnrepro.archs import REGISTRY
from attnrepro.errors import ConfigError

if TYPE_CHECKING:
    from attnrepro.config.types import Config, CorpusSpec, DownloadFile, ModelConfig, WmtDataConfig


# A model's results are results/{dataset}/{model}/ and its jobs are found by that path: a model named like a
# folder the workflow writes there, or like a rule (a target on the command line), makes the DAG cyclic or
# ambiguous. tests/test_never_lie.py checks this against `snakemake --list` and the rules' output paths.
RULE_NAMES = (
    "all", "average", "clean", "download", "encode", "extract", "figure_alignments", "figure_length",
    "figure_training", "figures", "generate", "score", "tables", "tokenizer", "train", "translate",
)  # fmt: skip
RESULT_FOLDERS = ("benchmarks", "captions", "data", "encoded", "figures", "logs", "raw", "tables", "tokenizer")
RESERVED_NAMES = tuple(sorted(set(RULE_NAMES) | set(RESULT_FOLDERS)))


def check(cfg: Config) -> None:
    """Raise `ConfigError` for the first constraint `cfg` breaks."""
    _check_names(cfg)
    _check_tokenizers(cfg)
    _check_data(cfg)
    _check_evaluate(cfg)
    for m in cfg.models.values():
        _check_architecture(cfg, m)
        _check_training(cfg, m)
        _check_search(cfg, m)


def _check_names(cfg: Config) -> None:
    for base in dict.fromkeys(m.base for m in cfg.models.values()):
        if base in RESERVED_NAMES:
            raise ConfigError(
                f"models.{base}: {base!r} is the name of a rule or of a folder under results/{cfg.dataset}/; "
                f"rename the model (reserved: {', '.join(RESERVED_NAMES)})"
            )


def _check_evaluate(cfg: Config) -> None:
    ev = cfg.evaluate
    if ev.max_len % ev.bucket_width:  # scoring.bucket_of: the last bucket would overlap the one before it
        raise ConfigError(
            f"evaluate.max_len={ev.max_len} is not a multiple of evaluate.bucket_width={ev.bucket_width}: "
            "the last length bucket would overlap the one before it"
        )


def _check_tokenizers(cfg: Config) -> None:
    for name, t in cfg.tokenizers.items():
        if t.train_split not in cfg.splits or not t.train_split.startswith("train"):
            raise ConfigError(
                f"tokenizers.{name}.train_split: {t.train_split!r} is not a training split "
                f"(configured: {', '.join(s for s in cfg.splits if s.startswith('train'))})"
            )
        if t.shared and t.side_vocab_size("src") != t.side_vocab_size("tgt"):
            raise ConfigError(
                f"tokenizers.{name}: a shared vocabulary has one size; drop src_vocab_size/tgt_vocab_size"
            )
        if t.kind == "spm" and t.pretokenize != "none":
            raise ConfigError(f"tokenizers.{name}.pretokenize: sentencepiece reads raw text; use pretokenize: none")


def _check_data(cfg: Config) -> None:
    if cfg.wmt is not None:
        _check_wmt_references(cfg.wmt)
    if cfg.wmt is not None and cfg.wmt.clean.min_len > cfg.wmt.clean.max_len:
        clean = cfg.wmt.clean
        raise ConfigError(
            f"data.wmt.clean.min_len={clean.min_len} exceeds data.wmt.clean.max_len={clean.max_len}: "
            "the filter would drop every training pair"
        )


def _check_architecture(cfg: Config, m: ModelConfig) -> None:
    """The arch is registered; what a model's constructor needs of its params, and of the data it will read."""
    if m.arch not in REGISTRY:  # the registry is the one list of archs (the schema only says "a string")
        raise ConfigError(f"models.{m.base}.arch: {m.arch!r} is not a registered arch ({', '.join(REGISTRY)})")
    key = f"models.{m.base}.params"
    if m.arch == "transformer":
        d_model, heads = m.params["d_model"], m.params["heads"]
        if d_model % heads:  # Vaswani 2017, §3.2.2: d_k = d_v = d_model / h
            raise ConfigError(f"{key}.heads={heads} does not divide {key}.d_model={d_model} (d_k = d_model / heads)")
        if m.params["share_embeddings"] and not cfg.tokenizers[m.tokenizer].shared:
            raise ConfigError(
                f"{key}.share_embeddings needs tokenizers.{m.tokenizer}.shared: true (one vocabulary, Vaswani §3.4)"
            )
    if m.arch == "memnet":
        # One temporal encoding T(i) per source position (MemN2N §4.1): the longest source must have one.
        longest = {f"models.{m.base}.train.max_src_len": m.train.max_src_len}
        if cfg.synthetic is not None:  # every test sentence is translated, up to max_test_len words
            longest["data.synthetic.max_test_len"] = cfg.synthetic.max_test_len
        source_key, tokens = max(longest.items(), key=lambda item: item[1])
        if m.params["max_positions"] < tokens:
            raise ConfigError(
                f"{key}.max_positions={m.params['max_positions']} is shorter than the sources it will read "
                f"({source_key}={tokens})"
            )


def _check_training(cfg: Config, m: ModelConfig) -> None:
    tc, key = m.train, f"models.{m.base}.train"
    if tc.schedule == "inverse_sqrt" and m.arch != "transformer":  # Vaswani 2017, eq. (3) scales by d_model^-0.5
        raise ConfigError(f"{key}.schedule: inverse_sqrt needs a d_model; arch {m.arch} has none (use constant)")
    if 0 < tc.update_tokens < tc.batch_tokens:
        raise ConfigError(
            f"{key}.update_tokens={tc.update_tokens} is less than one batch ({key}.batch_tokens={tc.batch_tokens}): "
            "use 0 for one batch per update, or at least batch_tokens"
        )
    if tc.patience == 0 and tc.plateau_decays > 0:
        raise ConfigError(
            f"{key}.plateau_decays={tc.plateau_decays} lowers the learning rate at a plateau, but patience=0 never "
            "finds one: set patience > 0, or plateau_decays: 0"
        )
    checkpoints = math.ceil(tc.max_steps / tc.checkpoint_every)
    if tc.average_last > checkpoints:
        raise ConfigError(
            f"{key}.average_last={tc.average_last} exceeds the {checkpoints} checkpoints"
            f" that max_steps={tc.max_steps} and checkpoint_every={tc.checkpoint_every} write"
        )
    if tc.patience > 0 and tc.average_last > 1:
        raise ConfigError(
            f"{key}: patience={tc.patience} translates the best validation's weights, average_last="
            f"{tc.average_last} the mean of the last checkpoints; set one of them (patience: 0 or average_last: 1)"
        )
    if tc.ema_decay > 0 and tc.average_last > 1:
        raise ConfigError(
            f"{key}: ema_decay={tc.ema_decay} translates a moving average of the weights, average_last="
            f"{tc.average_last} the mean of the last checkpoints; set one of them (ema_decay: 0 or average_last: 1)"
        )
    if cfg.synthetic is not None and tc.max_src_len > cfg.synthetic.max_train_len:
        raise ConfigError(
            f"{key}.max_src_len={tc.max_src_len} exceeds data.synthetic.max_train_len={cfg.synthetic.max_train_len}"
        )


def _check_search(cfg: Config, m: ModelConfig) -> None:
    search = cfg.search_of(m.name)
    # The search allows floor(a * source length + b) tokens before </s>: floor(a + b) for a one-token source.
    if math.floor(search.max_len_a + search.max_len_b) < 1:
        where = f"models.{m.base}.search" if {"max_len_a", "max_len_b"} & set(m.search) else "search"
        raise ConfigError(
            f"{where}.max_len_a={search.max_len_a} and max_len_b={search.max_len_b} allow no word before </s>: "
            "every translation would be empty"
        )


def _check_wmt_references(wmt: WmtDataConfig) -> None:
    """Every file name once, every corpus side in a configured file, every split's corpora configured."""
    by_name: dict[str, str] = {}
    for key, f in wmt.files.items():
        if f.name in by_name:
            raise ConfigError(f"data.wmt.files.{key}: file name {f.name!r} is also data.wmt.files.{by_name[f.name]}'s")
        by_name[f.name] = key
    for key, corpus in wmt.corpora.items():
        _check_corpus(key, corpus, wmt.files)
    for split, names in wmt.splits.items():
        for name in names:
            if name not in wmt.corpora:
                raise ConfigError(f"data.wmt.splits.{split}: no corpus named {name!r} under data.wmt.corpora")


def _check_corpus(key: str, corpus: CorpusSpec, files: dict[str, DownloadFile]) -> None:
    """Each side of data.wmt.corpora.KEY in a configured file; one file holding both sides names two members."""
    where = f"data.wmt.corpora.{key}"
    for side in ("src", "tgt"):
        file = corpus.file_of(side)
        if file is None:
            raise ConfigError(f"{where}: no file for {side}: give file (an archive of both sides) or {side}_file")
        if file not in files:
            name = f"{side}_file" if file != corpus.file else "file"
            raise ConfigError(f"{where}.{name}: no file named {file!r} under data.wmt.files")
    if corpus.file_of("src") == corpus.file_of("tgt"):
        if corpus.src is None or corpus.tgt is None:
            raise ConfigError(
                f"{where}: both sides are in {corpus.file_of('src')!r}; name each side's member (src, tgt)"
            )
        if corpus.src == corpus.tgt:
            raise ConfigError(f"{where}: src and tgt are the same member {corpus.src!r}")
