"""Loading a configuration: YAML -> JSON-schema validation -> cross-key checks -> frozen dataclasses.

The Snakefile validates `config` against `SCHEMA_PATH` (filling defaults); a run writes the
result to `results/{dataset}/config.yaml` when it starts, and every `attnrepro` verb reads that
file back through `load_config`, so jobs see exactly what the workflow validated. Constraints
between keys are checked by `attnrepro.constraints`.
"""

from __future__ import annotations

import copy
import datetime as dt
import math
from dataclasses import fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml

from attnrepro.config import constraints
from attnrepro.config.types import (
    CleanConfig,
    Config,
    CorpusSpec,
    DownloadFile,
    EuroparlDataConfig,
    EuroparlSample,
    EvaluateConfig,
    MeasuredThroughput,
    ModelConfig,
    ResourcesConfig,
    SearchConfig,
    SyntheticDataConfig,
    TokenizerConfig,
    TrainConfig,
    WmtDataConfig,
)
from attnrepro.errors import ConfigError

SCHEMA_PATH = Path(__file__).parent.parent / "schemas" / "config.schema.yaml"


def _build(cls: type, values: dict[str, Any]) -> Any:
    """Dataclass from a validated mapping (the schema already rejected unknown keys)."""
    known = {f.name for f in fields(cls)}
    unknown = set(values) - known
    if unknown:
        raise ConfigError(f"{cls.__name__}: unknown keys {sorted(unknown)}")
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    return cls(**values)


def validate(raw: dict[str, Any]) -> dict[str, Any]:
    """Validate `raw` against the schema, filling defaults in place; a violation raises `ConfigError` naming the key."""
    from jsonschema import ValidationError
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate as snakemake_validate

    _refuse_non_finite(raw)
    _dates_as_text(raw)
    try:
        snakemake_validate(raw, str(SCHEMA_PATH))
    except WorkflowError as err:
        violation = err.__context__  # Snakemake raises its WorkflowError while handling jsonschema's
        if not isinstance(violation, ValidationError):
            raise
        key = ".".join(str(part) for part in violation.absolute_path) or "(top level)"
        raise ConfigError(f"{key}: {violation.message}") from err
    return raw


def _refuse_non_finite(value: Any, key: str = "") -> None:
    """A `ConfigError` naming the first number that is NaN or infinite (YAML's .nan, .inf), wherever it is:
    JSON Schema's bounds are comparisons, and NaN passes every comparison. `x-` anchors are checked where
    they are merged."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{key}: {value} is not a finite number")
    if isinstance(value, list):
        for i, item in enumerate(value):
            _refuse_non_finite(item, f"{key}[{i}]")
    for name, item in value.items() if isinstance(value, dict) else ():
        if not (key == "" and str(name).startswith("x-")):
            _refuse_non_finite(item, f"{key}.{name}" if key else str(name))


def _dates_as_text(value: Any) -> None:
    """YAML reads an unquoted 2000-10-01 as a date: write it back as the text the schema checks, in place."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in list(items):
        if isinstance(item, dt.date):
            value[key] = item.isoformat()
        else:
            _dates_as_text(item)


def _date(text: str, key: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"{key}: {text!r} is not a date YYYY-MM-DD") from None


def _build_europarl(raw: dict[str, Any]) -> EuroparlDataConfig:
    """data.europarl with its dates parsed and its windows checked."""
    samples = {
        split: _build(
            EuroparlSample,
            {
                **raw[split],
                **{key: _date(raw[split][key], f"data.europarl.{split}.{key}") for key in ("first_day", "last_day")},
            },
        )
        for split in ("valid", "test")
    }
    days = {key: _date(raw[key], f"data.europarl.{key}") for key in ("first_day", "last_day")}
    rest = {k: v for k, v in raw.items() if k not in ("valid", "test", "clean", "first_day", "last_day")}
    cfg = EuroparlDataConfig(**rest, **days, **samples, clean=_build(CleanConfig, raw["clean"]))
    _check_europarl_windows(cfg)
    return cfg


def _check_europarl_windows(cfg: EuroparlDataConfig) -> None:
    """Each window inside first_day .. last_day, validation before the test window and apart from it, so that
    the three splits are disjoint by date; a sample's buckets tile its max_len."""
    key = "data.europarl"
    if cfg.first_day > cfg.last_day:
        raise ConfigError(f"{key}.first_day={cfg.first_day} is after {key}.last_day={cfg.last_day}")
    for split, window in (("valid", cfg.valid), ("test", cfg.test)):
        where = f"{key}.{split}"
        if window.first_day > window.last_day:
            raise ConfigError(f"{where}.first_day={window.first_day} is after {where}.last_day={window.last_day}")
        if window.first_day < cfg.first_day or window.last_day > cfg.last_day:
            raise ConfigError(f"{where}: {window.first_day} .. {window.last_day} is not inside {key}.first_day .. "
                              f"last_day ({cfg.first_day} .. {cfg.last_day})")  # fmt: skip
        if window.max_len % window.bucket_width:
            raise ConfigError(f"{where}.max_len={window.max_len} is not a multiple of {where}.bucket_width="
                              f"{window.bucket_width}: the last bucket would be cut")  # fmt: skip
    if cfg.valid.last_day >= cfg.test.first_day:
        raise ConfigError(f"{key}.valid.last_day={cfg.valid.last_day} is not before {key}.test.first_day="
                          f"{cfg.test.first_day}: validation days come before the test days")  # fmt: skip


def _build_wmt(raw: dict[str, Any]) -> WmtDataConfig:
    """data.wmt with file names filled in (constraints.py checks its cross-references, naming the key)."""
    files = {}
    for key, f in raw["files"].items():
        name = f.get("name") or Path(urlparse(f["url"]).path).name
        if not name:
            raise ConfigError(f"data.wmt.files.{key}.url: {f['url']!r} has no file name; set data.wmt.files.{key}.name")
        files[key] = _build(DownloadFile, {**f, "name": name})
    corpora = {key: _build(CorpusSpec, c) for key, c in raw["corpora"].items()}
    splits = {split: tuple(names) for split, names in raw["splits"].items()}
    rest = {k: v for k, v in raw.items() if k not in ("files", "corpora", "splits", "clean")}
    return WmtDataConfig(files=files, corpora=corpora, splits=splits, clean=_build(CleanConfig, raw["clean"]), **rest)


def _model_resources(top: ResourcesConfig, own: dict[str, Any]) -> ResourcesConfig:
    """The top-level resources with the model's own keys over them."""
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in own.items()}
    if "measured" in values:
        values["measured"] = MeasuredThroughput(**values["measured"])
    return replace(top, **values)


def _seed_runs(models: dict[str, ModelConfig], seeds: list[int] | None) -> dict[str, ModelConfig]:
    """Without `seeds` the configured models; with them, NAME_seed{s} for every model and seed, train.seed = s.
    Distinct by construction: every model is expanded, a name ends in `_seed` + digits, the schema has no repeats."""
    if seeds is None:
        return models
    return {
        f"{name}_seed{seed}": replace(m, name=f"{name}_seed{seed}", train=replace(m.train, seed=seed))
        for name, m in models.items()
        for seed in seeds
    }


def from_dict(raw: dict[str, Any]) -> Config:
    """Validate a config mapping and build the dataclasses; checks what the schema cannot."""
    raw = validate(copy.deepcopy(raw))
    tokenizers = {name: _build(TokenizerConfig, t) for name, t in raw["tokenizers"].items()}
    resources = _build(ResourcesConfig, raw["resources"])
    models = {}
    for name, m in raw["models"].items():
        train = _build(TrainConfig, m["train"])
        tokenizer = m.get("tokenizer")
        if tokenizer is None:
            if len(tokenizers) != 1:
                raise ConfigError(
                    f"models.{name}.tokenizer: required when there are several tokenizers ({', '.join(tokenizers)})"
                )
            tokenizer = next(iter(tokenizers))
        if tokenizer not in tokenizers:
            raise ConfigError(
                f"models.{name}.tokenizer: no tokenizer named {tokenizer!r} (configured: {', '.join(tokenizers)})"
            )
        models[name] = ModelConfig(
            name=name,
            arch=m["arch"],
            label=m.get("label", name),
            params=dict(m["params"]),
            train=train,
            tokenizer=tokenizer,
            search=dict(m.get("search", {})),
            resources=_model_resources(resources, m.get("resources", {})),
        )
    synthetic = _build(SyntheticDataConfig, raw["data"]["synthetic"]) if "synthetic" in raw["data"] else None
    wmt = _build_wmt(raw["data"]["wmt"]) if "wmt" in raw["data"] else None
    europarl = _build_europarl(raw["data"]["europarl"]) if "europarl" in raw["data"] else None
    cfg = Config(
        dataset=raw["dataset"],
        tokenizers=tokenizers,
        models=_seed_runs(models, raw.get("seeds")),  # constraints name the configured model (ModelConfig.base)
        synthetic=synthetic,
        wmt=wmt,
        europarl=europarl,
        search=_build(SearchConfig, raw["search"]),
        evaluate=_build(EvaluateConfig, raw["evaluate"]),
        resources=resources,
    )
    constraints.check(cfg)
    return cfg


def _refuse_duplicate_keys(loader: yaml.SafeLoader, node: yaml.Node, path: Path, key_path: str, seen: set) -> None:
    """Raise `ConfigError` for a key given twice in one mapping under `node`: YAML would keep the last silently.

    Keys a `<<` merge brings in are not duplicates: a key of its own beside them is the override it means.
    """
    if id(node) in seen:  # an alias: its anchor was checked where it was defined
        return
    seen.add(id(node))
    if isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _refuse_duplicate_keys(loader, item, path, f"{key_path}[{i}]", seen)
    if not isinstance(node, yaml.MappingNode):
        return
    first_line: dict[Any, int] = {}
    for key_node, value_node in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            _refuse_duplicate_keys(loader, value_node, path, key_path, seen)
            continue
        key = loader.construct_object(key_node, deep=True)
        name = f"{key_path}.{key}" if key_path else str(key)
        line = key_node.start_mark.line + 1
        if isinstance(key, (str, int, float, bool)) and key in first_line:
            raise ConfigError(
                f"{path}:{line}: {name} is given twice (lines {first_line[key]} and {line}); "
                "YAML would keep only the second: rename or remove one"
            )
        if isinstance(key, (str, int, float, bool)):
            first_line[key] = line
        _refuse_duplicate_keys(loader, value_node, path, name, seen)


def read_yaml(path: str | Path) -> Any:
    """A config file's data (YAML, or JSON as Snakemake also accepts); a `ConfigError` naming the file (and
    line) when it is missing, not YAML, or gives a key twice in one mapping."""
    path = Path(path)
    try:
        loader = yaml.SafeLoader(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: cannot be read: {err}") from err
    try:
        node = loader.get_single_node()
        if node is None:  # an empty file
            return None
        _refuse_duplicate_keys(loader, node, path, "", set())
        return loader.construct_document(node)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)  # where the parser stopped, for a syntax error
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise ConfigError(f"{where}: not valid YAML: {getattr(err, 'problem', None) or err}") from err
    finally:
        loader.dispose()


def check_config_files(paths: list[str | Path]) -> dict[Path, Any]:
    """Each config file Snakemake was given, read with `read_yaml`: Snakemake's own loader keeps the last of
    a key given twice without a word, so the Snakefile reads its files with ours before anything runs."""
    return {Path(path): read_yaml(path) for path in paths}


def lock_file_of(files: dict[Path, Any]) -> Path:
    """Where sizes and sha256 that data.wmt.files does not give are pinned: NAME.lock.yaml beside the first
    config file that names data.wmt.files, so that an overlay given after it (seeds, a mirror) reads and
    writes the same pins; beside the last config file when none names them."""
    for path, raw in files.items():
        data = raw.get("data") if isinstance(raw, dict) else None
        wmt = data.get("wmt") if isinstance(data, dict) else None
        if isinstance(wmt, dict) and "files" in wmt:
            return path.with_name(f"{path.stem}.lock.yaml")
    last = list(files)[-1] if files else Path("config.yaml")
    return last.with_name(f"{last.stem}.lock.yaml")


def check_mirror(cfg: Config) -> None:
    """data.wmt.mirror must be a folder when the workflow is parsed, so that a dry run names a mistyped one
    (the download job checks it again: a folder can go away between the plan and the run)."""
    mirror = cfg.published.mirror if cfg.published is not None else None
    if mirror is not None and not Path(mirror).is_dir():
        where = "" if Path(mirror).is_absolute() else f" (relative to {Path.cwd()})"
        section = "wmt" if cfg.wmt is not None else "europarl"
        raise ConfigError(f"data.{section}.mirror: {mirror} is not a folder{where}")


FILE_KEYS = (  # files a config names that travel with it: a relative path is relative to the config file's folder
    ("data", "europarl", "manifest"),
    ("data", "europarl", "test", "ids"),
    ("data", "europarl", "valid", "ids"),
)


def anchor_paths(raw: dict[str, Any], files: dict[Path, Any]) -> dict[str, Any]:
    """`raw` (the merged config) with every FILE_KEYS path that is relative made absolute against the folder of
    the config file that gave it (the last one to give it, as the merge keeps the last), in place; so the
    config reads the same from any working directory and the jobs' copy in results/ names the same files."""
    for keys in FILE_KEYS:
        for path, data in files.items():
            value = _get(data, keys)
            if isinstance(value, str) and not Path(value).is_absolute() and _get(raw, keys) == value:
                _get(raw, keys[:-1])[keys[-1]] = str((path.parent / value).resolve())
    return raw


def _get(data: Any, keys: tuple[str, ...]) -> Any:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def merged(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """`overlay` over `base`, mappings merged key by key, anything else replaced: what Snakemake does with a
    second --configfile (snakemake.utils.update_config)."""
    out = dict(base)
    for key, value in overlay.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def load_config(path: str | Path, *overlays: str | Path) -> Config:
    """Read, validate and build a config file, with `overlays` merged over it as Snakemake merges further
    --configfile files; every problem with them is a `ConfigError` naming the file (the last, for a merge)."""
    raw: Any = {}
    files = {Path(file): read_yaml(file) for file in (path, *overlays)}
    for file, data in files.items():
        if not isinstance(data, dict):
            raise ConfigError(f"{file}: expected a mapping at the top level")
        raw = merged(raw, data)
    anchor_paths(raw, files)
    try:
        return from_dict(raw)
    except ConfigError as err:
        raise ConfigError(f"{' + '.join(map(str, files))}: {err}") from err
