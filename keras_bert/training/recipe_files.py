"""YAML / JSON recipes -> run configs (`PretrainConfig`, `FinetuneConfig`).

A recipe is the config's fields as a mapping; `--set key=value` overrides
(values parsed as YAML: `--set train_steps=10`, `--set eval_files=null`) and
then keyword fields apply on top. Unknown fields and values of the wrong kind
fail naming the file and the field.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import yaml  # JSON is a subset of YAML: one parser for both.


def read_recipe(config_class: type, path: str | None = None, overrides: Sequence[str] = (),
                float_fields: Sequence[str] = (), **fields: Any) -> Any:
    """`config_class(**values)` from the recipe at `path`, `overrides`, `fields`."""
    values = {}
    source = path or "config"
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                values = yaml.safe_load(f) or {}
        except FileNotFoundError:
            raise FileNotFoundError(f"recipe not found: {path}") from None
        except yaml.YAMLError as e:
            raise ValueError(f"{path}: not valid YAML/JSON ({e})") from None
        if not isinstance(values, dict):
            raise ValueError(f"{path}: expected a mapping of config fields")
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--set expects key=value, got {item!r}")
        values[key.strip()] = yaml.safe_load(value)
    values.update(fields)
    known = {f.name for f in dataclasses.fields(config_class)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"{source}: unknown config field(s) {unknown}; known: {sorted(known)}")
    for name in float_fields:
        # YAML reads `1e-4` (no dot) as a string and `1` as an int.
        value = values.get(name)
        if isinstance(value, (int, str)) and not isinstance(value, bool):
            try:
                values[name] = float(value)
            except ValueError:
                raise ValueError(f"{source}: config field {name} must be a number, "
                                 f"got {value!r}") from None
    try:
        return config_class(**values)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{source}: {e}") from None
