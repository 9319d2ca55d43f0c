"""The schema of each arch's `models.NAME.params`, generated from the registry (`attnrepro.archs`).

config.schema.yaml's `model` refers to `$defs/arch_params`, a block of that file between two marker
comments that `attnrepro regenerate schema` writes from `block()` (tests/test_config.py fails naming the
command when the committed block is not what it writes). It lives in the same file because Snakemake's
validator fills defaults only within one file's schema. Every registered arch gets one
`if arch is X then params is ...` clause: its keys with their types, bounds and defaults (the schema fills
them in), any other key refused by name.
"""

from __future__ import annotations

from typing import Any

import yaml

from attnrepro.archs import REGISTRY, Param


def param_schema(param: Param) -> dict[str, Any]:
    """One parameter as JSON Schema: its type from its default's, its bounds, its default and description."""
    if param.choices:
        schema: dict[str, Any] = {"enum": list(param.choices)}
    else:
        kind = {bool: "boolean", int: "integer", float: "number", str: "string"}[type(param.default)]
        schema = {"type": kind}
    bounds = {
        "minimum": param.minimum,
        "exclusiveMinimum": param.exclusive_minimum,
        "maximum": param.maximum,
        "multipleOf": param.multiple_of,
    }
    schema |= {key: value for key, value in bounds.items() if value is not None}
    schema["default"] = param.default
    if param.doc:
        schema["description"] = param.doc
    return schema


def arch_params() -> dict[str, Any]:
    """`$defs/arch_params`: one clause per registered arch."""
    clauses = []
    for name, arch in REGISTRY.items():
        params = {
            "type": "object",
            "additionalProperties": False,
            "description": f"{arch.name}: {arch.paper} (models/{arch.module}.py)",
            "properties": {key: param_schema(p) for key, p in arch.params.items()},
        }
        clauses.append({"if": {"properties": {"arch": {"const": name}}}, "then": {"properties": {"params": params}}})
    return {"description": "models.NAME.params of each arch (attnrepro.archs.REGISTRY)", "allOf": clauses}


def block() -> str:
    """The generated lines of config.schema.yaml: `arch_params:` as an entry of its `$defs` (indented by two)."""
    text = yaml.safe_dump(
        {"arch_params": arch_params()}, sort_keys=False, allow_unicode=True, width=118, default_flow_style=None
    )
    return "".join(f"  {line}" for line in text.splitlines(keepends=True))
