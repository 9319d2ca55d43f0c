"""config/README.md explains every key of the config schema, and names no key the schema lacks."""

from __future__ import annotations

import re

import yaml

from conftest import REPO

SCHEMA = REPO / "src/attnrepro/schemas/config.schema.yaml"
README = REPO / "config/README.md"
SECTIONS = ("dataset", "seeds", "data", "tokenizers", "models", "search", "evaluate", "resources")


def schema_keys() -> list[str]:
    """Every key of the schema as a dotted path; NAME stands for a name the user chooses (models.NAME.arch)."""
    schema = yaml.safe_load(SCHEMA.read_text())
    keys: list[str] = []

    def walk(node: dict, path: str, refs: tuple[str, ...]) -> None:
        if "$ref" in node:
            name = node["$ref"].split("/")[-1]
            if name not in refs:
                walk(schema["$defs"][name], path, (*refs, name))
        for combined in ("allOf", "anyOf", "oneOf"):
            for sub in node.get(combined, []):
                walk(sub, path, refs)
        for key, sub in node.get("properties", {}).items():
            keys.append(f"{path}.{key}" if path else key)
            if isinstance(sub, dict):
                walk(sub, keys[-1], refs)
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], f"{path}.NAME", refs)

    walk(schema, "", ())
    return keys


def documented() -> set[str]:
    """The key paths config/README.md names in backticks in its list items (a wrapped item's lines indented)."""
    items: list[str] = []
    for line in README.read_text().splitlines():
        if line.lstrip().startswith("- "):
            items.append(line)
        elif items and line.startswith("  ") and line.strip():
            items[-1] += " " + line.strip()
        else:
            items.append("")
    names = {m for item in items for m in re.findall(r"`([^`\s]+)`", item)}
    return {n for n in names if n.split(".")[0] in SECTIONS and "KEY" not in n}


def covers(key: str, lines: set[str]) -> bool:
    """A model's own `search` and `resources` keys are explained once, under the top-level key of that name."""
    model_override = re.fullmatch(r"models\.NAME\.((?:search|resources)\..+)", key)
    return key in lines or bool(model_override and model_override[1] in lines)


def test_every_schema_key_has_a_line_in_config_readme():
    keys, lines = schema_keys(), documented()
    assert len(keys) > 100  # the walk found the schema's keys
    missing = [k for k in keys if not covers(k, lines)]
    assert not missing, f"config/README.md has no line for: {', '.join(missing)}"


def test_config_readme_names_no_key_the_schema_lacks():
    keys = set(schema_keys())
    stale = sorted(n for n in documented() if n not in keys and f"models.NAME.{n}" not in keys)
    assert not stale, f"config/README.md names keys the schema does not have: {', '.join(stale)}"
