"""The tokenizer settings of a HuggingFace BERT folder, beyond its casing.

HuggingFace's `BertTokenizer` / `BertTokenizerFast` read these from
`tokenizer_config.json` (and `special_tokens_map.json`, which wins):

  strip_accents           None follows do_lower_case; False keeps accents while
                          lowercasing; True strips them without lowercasing.
  special tokens          [CLS], [SEP], [MASK], [PAD], [UNK], any
                          additional_special_tokens and added tokens: written
                          in the text, each is its id, never split into
                          "[", "cl", "##s", "]".
  tokenize_chinese_chars  False leaves CJK ideographs inside their words.
  never_split             (the slow BertTokenizer only) whole words kept as they are.
  do_basic_tokenize       False skips lowercasing and splitting altogether.

`read_tokenizer_options` returns what `BertTokenizer` implements (`strip_accents`,
`special_tokens`) and refuses, naming the file and the field, the values it
does not (tokenize_chinese_chars false: tensorflow-text's WordPiece splits CJK
ideographs itself; never_split beyond the special tokens; do_basic_tokenize
false; special tokens other than the vocabulary's [CLS] / [SEP] / ...).
`do_lower_case` is `casing.casing_from_tokenizer_config`'s.
"""

from __future__ import annotations

import os
from typing import Any

from keras_bert.checkpoints.load import read_json

TOKENIZER_CONFIG = "tokenizer_config.json"
SPECIAL_TOKENS_MAP = "special_tokens_map.json"
ADDED_TOKENS = "added_tokens.json"
# BertTokenizer's SPECIAL_TOKENS (not imported: resolving a checkpoint does
# not load tensorflow-text), and HuggingFace's field for each.
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
_NAMED = dict(
    zip(("pad_token", "unk_token", "cls_token", "sep_token", "mask_token"), SPECIAL_TOKENS)
)


def _refuse(path: str, field: str, value: Any, why: str) -> ValueError:
    return ValueError(f"{path}: {field} {value!r} is not supported: {why}")


def _content(token: Any, path: str, field: str) -> str:
    """A token as HuggingFace writes it: a string or an AddedToken dict."""
    if isinstance(token, dict) and isinstance(token.get("content"), str):
        if token.get("single_word"):
            raise _refuse(
                path,
                field,
                token["content"],
                "single_word tokens match only as whole words, which keras_bert's "
                "tokenizer does not do; remove single_word or the token",
            )
        return token["content"]
    if isinstance(token, str):
        return token
    raise ValueError(f"{path}: {field} must be a token (a string), got {token!r}")


def _settings(path: str) -> dict[str, Any]:
    if not os.path.exists(path):
        return {}
    settings = read_json(path)
    if not isinstance(settings, dict):
        raise ValueError(f"{path}: must hold a JSON object, got {type(settings).__name__}")
    return settings


def read_tokenizer_options(folder: str) -> dict[str, Any]:
    """`BertTokenizer`'s `strip_accents` and `special_tokens` for the
    HuggingFace folder `folder`; ValueError naming the file and the field for
    a setting it does not implement. A folder without tokenizer_config.json
    gets HuggingFace's defaults (its five special tokens matched in the text)."""
    config_path = os.path.join(folder, TOKENIZER_CONFIG)
    config = _settings(config_path)

    strip_accents = config.get("strip_accents")
    if strip_accents is not None and not isinstance(strip_accents, bool):
        raise ValueError(
            f"{config_path}: strip_accents must be true, false or null, got {strip_accents!r}"
        )
    for field, why in (
        (
            "tokenize_chinese_chars",
            "tensorflow-text's WordPiece splits CJK ideographs into words of "
            "their own, as the original BERT; use a folder with "
            "tokenize_chinese_chars true (HuggingFace's default)",
        ),
        (
            "do_basic_tokenize",
            "keras_bert always cleans, lowercases (if uncased) and splits on "
            "whitespace and punctuation before WordPiece; set it to true",
        ),
    ):
        value = config.get(field)
        if value is None or value is True:
            continue
        if value is False:
            raise _refuse(config_path, field, value, why)
        raise ValueError(f"{config_path}: {field} must be true, false or null, got {value!r}")

    # special_tokens_map.json, when present, overrides tokenizer_config.json.
    map_path = os.path.join(folder, SPECIAL_TOKENS_MAP)
    named = {**config, **_settings(map_path)}
    origin = {
        key: map_path if key in _settings(map_path) else config_path
        for key in (*_NAMED, "additional_special_tokens")
    }
    for field, ours in _NAMED.items():
        value = named.get(field)
        if value is None:
            continue
        token = _content(value, origin[field], field)
        if token != ours:
            raise _refuse(
                origin[field],
                field,
                token,
                f"keras_bert's tokenizer uses {ours} (a vocabulary needs "
                f"{', '.join(SPECIAL_TOKENS)})",
            )
    special = list(SPECIAL_TOKENS)
    additional = named.get("additional_special_tokens") or []
    if not isinstance(additional, list):
        raise ValueError(
            f"{origin['additional_special_tokens']}: additional_special_tokens must "
            f"be a list, got {additional!r}"
        )
    special += [
        _content(token, origin["additional_special_tokens"], "additional_special_tokens")
        for token in additional
    ]
    # Added tokens (transformers >= 4.34 writes them here; older versions in
    # added_tokens.json) are matched in the text like the special ones.
    decoder = config.get("added_tokens_decoder") or {}
    if not isinstance(decoder, dict):
        raise ValueError(f"{config_path}: added_tokens_decoder must be an object")
    special += [_content(t, config_path, "added_tokens_decoder") for t in decoder.values()]
    added_path = os.path.join(folder, ADDED_TOKENS)
    special += list(_settings(added_path))

    never_split = config.get("never_split")
    if never_split is not None:
        if not isinstance(never_split, list) or not all(isinstance(t, str) for t in never_split):
            raise ValueError(
                f"{config_path}: never_split must be a list of tokens or null, got {never_split!r}"
            )
        others = [t for t in never_split if t not in special]
        if others:
            raise _refuse(
                config_path,
                "never_split",
                others,
                "keras_bert keeps only special tokens whole (BertTokenizerFast "
                "ignores never_split altogether); list them as "
                "additional_special_tokens if they are tokens of the vocabulary, "
                "or remove never_split",
            )
    return {"strip_accents": strip_accents, "special_tokens": tuple(dict.fromkeys(special))}
