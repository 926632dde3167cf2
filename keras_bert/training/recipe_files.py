"""YAML / JSON recipes -> run configs (`PretrainConfig`, `FinetuneConfig`).

A recipe is the config's fields as a mapping; `--set key=value` overrides
(values parsed as YAML: `--set train_steps=10`, `--set eval_files=null`) and
then keyword fields apply on top. Every value is checked against its field's
type (the dataclass annotation) before the config is built: booleans are
only `true` / `false` (YAML 1.1's `yes`, `no`, `on`, `off` stay words, and a
word in a boolean field is refused), integers are integers, floats take
integers and `1e-4`, lists are lists, and fields with a fixed set of values
take only those. Unknown fields, repeated keys and wrong values fail naming
the field and where the value came from (the file, or the `--set` item).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import types
import typing
from typing import Any, Mapping, Sequence

import yaml  # JSON is a subset of YAML: one parser for both.

from keras_bert.training import distribute


class _StrictLoader(yaml.SafeLoader):
    """YAML with booleans spelled true / false only (as in YAML 1.2 and JSON),
    and no key given twice."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} is given twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_BOOL_TAG = "tag:yaml.org,2002:bool"
_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != _BOOL_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_StrictLoader.add_implicit_resolver(
    _BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)

# Fields both run configs share whose values are a fixed list.
# (`verbose`: Keras' progress, "auto", 0, 1 or 2; annotated `str | int` in both configs.)
SHARED_CHOICES = {
    "strategy": distribute.STRATEGIES,
    "train_loop": distribute.TRAIN_LOOPS,
    "jit_compile": (True, False, "auto"),
    "verbose": ("auto", 0, 1, 2),
}


def parse_value(text: str) -> Any:
    """One `--set` value: YAML with booleans only true / false."""
    return yaml.load(text, Loader=_StrictLoader)


def check_finite_fields(config: Any, non_negative: Sequence[str] = ()) -> None:
    """Every number field of a run config (`PretrainConfig`, `FinetuneConfig`,
    from a recipe or from Python) is finite, and those of `non_negative` are
    >= 0: a learning rate of nan or inf trains a model of nan weights."""
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        if not math.isfinite(value):
            raise ValueError(f"config field {field.name} must be a finite number, got {value!r}")
        if field.name in non_negative and value < 0:
            raise ValueError(f"config field {field.name} must be >= 0, got {value!r}")


def check_positive_int_fields(
    config: Any, required: Sequence[str], optional: Sequence[str] = ()
) -> None:
    """The fields `required` and `optional` of a run config are positive
    integers; those of `optional` may also be None (not set)."""
    for name in (*required, *optional):
        value = getattr(config, name)
        if value is None and name in optional:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"config field {name} must be a positive integer, got {value!r}")


def read_recipe(
    config_class: type,
    path: str | None = None,
    overrides: Sequence[str] = (),
    float_fields: Sequence[str] = (),
    choices: Mapping[str, Sequence[Any]] = None,
    **fields: Any,
) -> Any:
    """`config_class(**values)` from the recipe at `path`, `overrides`, `fields`.

    `choices`: field -> its allowed values (besides SHARED_CHOICES). `float_fields`
    is kept for callers; float fields are known from the annotations."""
    values, origins = {}, {}
    source = path or "config"
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                loaded = yaml.load(f, Loader=_StrictLoader) or {}
        except FileNotFoundError:
            raise FileNotFoundError(f"recipe not found: {path}") from None
        except yaml.YAMLError as e:
            raise ValueError(f"{path}: not valid YAML/JSON ({e})") from None
        if not isinstance(loaded, dict):
            raise ValueError(f"{path}: expected a mapping of config fields")
        values.update(loaded)
        origins.update(dict.fromkeys(loaded, path))
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--set expects key=value, got {item!r}")
        try:
            values[key.strip()] = parse_value(value)
        except yaml.YAMLError as e:
            raise ValueError(f"--set {item}: not a valid value ({e})") from None
        origins[key.strip()] = f"--set {item}"
    # A flag and a --set item for one field: which one the user meant is a
    # guess, and the other would be dropped without a word.
    both = sorted(name for name in fields if origins.get(name, "").startswith("--set "))
    if both:
        raise ValueError(
            f"{', '.join(origins[name] for name in both)}: also given by its flag "
            f"({', '.join(both)}); give each field once"
        )
    values.update(fields)
    origins.update(dict.fromkeys(fields, source))
    known = {f.name for f in dataclasses.fields(config_class)}
    unknown = sorted(set(values) - known)
    if unknown:
        where = sorted({origins[name] for name in unknown})
        near = {name: difflib.get_close_matches(name, known, n=1) for name in unknown}
        hints = "".join(
            f" ({name}: did you mean {match[0]}?)" for name, match in near.items() if match
        )
        raise ValueError(
            f"{', '.join(where)}: unknown config field(s) {unknown}{hints}; known: {sorted(known)}"
        )
    field_types = typing.get_type_hints(config_class)
    defaults = {f.name: f.default for f in dataclasses.fields(config_class)}
    allowed = {**SHARED_CHOICES, **(choices or {})}
    for name, value in values.items():
        values[name] = typed_value(
            name,
            value,
            field_types[name],
            allowed.get(name),
            origins[name],
            nullable=defaults[name] is None,
        )
    try:
        return config_class(**values)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{source}: {e}") from None


def typed_value(
    name: str,
    value: Any,
    annotation: Any,
    choices: Sequence[Any] | None,
    origin: str,
    nullable: bool = True,
) -> Any:
    """`value` as the field's type, or a ValueError naming the field and `origin`.
    null only where the field takes it: its default is null, or its annotation
    says `| None` (`clipnorm: null`, no clipping); elsewhere a null would reach
    code that reads a number or a word, far from the recipe line."""
    if value is None:
        if nullable or type(None) in _members(annotation):
            return None
        raise ValueError(
            f"{origin}: config field {name} takes no null: give {_kind_words(annotation, choices)}"
        )
    if choices is not None:
        # `True in (1, ...)` holds in Python: compare types too.
        if not any(value == choice and type(value) is type(choice) for choice in choices):
            shown = [
                "null" if c is None else str(c).lower() if isinstance(c, bool) else str(c)
                for c in choices
            ]
            raise ValueError(
                f"{origin}: config field {name} must be "
                f"{', '.join(shown[:-1])} or {shown[-1]}, got {value!r}"
            )
        return value
    for member in _members(annotation):
        converted = _as_type(value, member)
        if converted is not _REFUSED:
            return converted
    raise ValueError(
        f"{origin}: config field {name} must be {_kind_words(annotation, None)}, got {value!r}"
    )


def _members(annotation: Any) -> tuple:
    """`int | None` -> (int, NoneType); `int` -> (int,)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return (annotation,)


def _kind_words(annotation: Any, choices: Sequence[Any] | None) -> str:
    """What a field takes, in words: "an integer", "true or false", "auto, 0, 1 or 2"."""
    if choices is not None:
        shown = [
            str(c).lower() if isinstance(c, bool) else str(c) for c in choices if c is not None
        ]
        return f"{', '.join(shown[:-1])} or {shown[-1]}" if len(shown) > 1 else shown[0]
    kinds = [
        _KINDS.get(m, getattr(m, "__name__", str(m)))
        for m in _members(annotation)
        if m is not type(None)
    ]
    return " or ".join(kinds)


_REFUSED = object()
_KINDS = {
    bool: "true or false",
    int: "an integer",
    float: "a number",
    str: "text",
    list: "a list (e.g. [a, b])",
}


def _as_type(value, kind):
    if kind in (object, Any):
        return value
    if kind is bool:
        return value if isinstance(value, bool) else _REFUSED
    if kind is int:
        return value if isinstance(value, int) and not isinstance(value, bool) else _REFUSED
    if kind is float:
        if isinstance(value, bool):
            return _REFUSED
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads `1e-4` (no dot) as text
            try:
                return float(value)
            except ValueError:
                return _REFUSED
        return _REFUSED
    if kind is str:
        return value if isinstance(value, str) else _REFUSED
    if kind is list or typing.get_origin(kind) is list:
        return list(value) if isinstance(value, (list, tuple)) else _REFUSED
    return value if isinstance(kind, type) and isinstance(value, kind) else _REFUSED
