"""Is a checkpoint cased or uncased? The evidence, strongest first.

A BERT checkpoint does not store whether its text was lowercased: an uncased
model fed cased text (or the reverse) runs without complaint and scores worse.
The evidence we read:

  1. HuggingFace `tokenizer_config.json`: `do_lower_case`.
  2. The original TF1 release's folder name (`uncased_L-12_H-768_A-12`), the rule
     of google-research/bert's `tokenization.validate_case_matches_checkpoint`.
  3. The vocabulary: upper-case letters in its entries mean a cased model
     (an uncased model never sees them), none mean uncased.

`choose_lowercase` returns the detected value, or checks one that was given.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re

from keras_bert import text_files
from keras_bert.checkpoints.load import read_json


@dataclasses.dataclass(frozen=True)
class Casing:
    """Whether text must be lowercased for a checkpoint, and why we think so."""

    lowercase: bool
    evidence: str  # e.g. "TF1 folder name uncased_L-12_H-768_A-12"

    def describe(self) -> str:
        return f"{'uncased' if self.lowercase else 'cased'} (lowercase={self.lowercase}: {self.evidence})"


# === HuggingFace ===


def casing_from_tokenizer_config(path: str) -> Casing | None:
    """`do_lower_case` of a HuggingFace `tokenizer_config.json`; None where the
    file or the key is absent (the vocabulary decides then)."""
    if not os.path.exists(path):
        return None
    settings = read_json(path)
    value = settings.get("do_lower_case") if isinstance(settings, dict) else None
    if value is None:
        return None
    if not isinstance(value, bool):
        raise ValueError(f"{path}: do_lower_case must be true or false, got {value!r}")
    return Casing(value, f"{os.path.basename(path)} do_lower_case {json.dumps(value)}")


# === Original TF1 releases ===

# The folder names google-research/bert's validate_case_matches_checkpoint knows.
TF1_UNCASED_MODELS = (
    "uncased_L-24_H-1024_A-16",
    "uncased_L-12_H-768_A-12",
    "multilingual_L-12_H-768_A-12",
    "chinese_L-12_H-768_A-12",
)
TF1_CASED_MODELS = (
    "cased_L-12_H-768_A-12",
    "cased_L-24_H-1024_A-16",
    "multi_cased_L-12_H-768_A-12",
)
# The original's pattern: the folder right above `bert_model.ckpt`.
_TF1_MODEL_NAME = re.compile(r"^.*?([A-Za-z0-9_-]+)/bert_model.ckpt")
# Google's later releases with names of the same form, which the original's list
# predates: whole-word masking (wwm_uncased_L-24_H-1024_A-16) and the 24 small
# BERTs (uncased_L-4_H-256_A-4). Multilingual without "cased" and Chinese are uncased.
_TF1_RELEASE = re.compile(
    r"(?:wwm_)?(uncased|cased|multi_cased|multilingual|chinese)"
    r"_L-\d+_H-\d+_A-\d+"
)


def casing_from_tf1_name(checkpoint_prefix: str) -> Casing | None:
    """The casing of an original release from the folder holding its
    `bert_model.ckpt`; None for any other name."""
    match = _TF1_MODEL_NAME.match(checkpoint_prefix.replace(os.sep, "/"))
    if match is None:
        return None
    name = match.group(1)
    if name in TF1_UNCASED_MODELS or name in TF1_CASED_MODELS:
        return Casing(name in TF1_UNCASED_MODELS, f"TF1 folder name {name}")
    release = _TF1_RELEASE.fullmatch(name)
    if release is None:
        return None
    return Casing(
        release.group(1) in ("uncased", "multilingual", "chinese"), f"TF1 folder name {name}"
    )


# === The vocabulary ===


def _is_special(entry: str) -> bool:
    # [PAD], [CLS], [unused12]...: upper-case in uncased vocabularies too.
    return entry.startswith("[") and entry.endswith("]")


def casing_from_vocabulary(vocab_file: str) -> Casing:
    """Cased if any entry (special tokens aside) has a letter that lowercasing changes."""
    if not os.path.exists(vocab_file):
        raise FileNotFoundError(f"vocabulary not found: {vocab_file}")
    cased = []
    for entry in text_files.read_lines(vocab_file, missing="vocabulary not found"):
        if not _is_special(entry) and entry.lower() != entry:
            cased.append(entry)
    name = os.path.basename(vocab_file)
    if not cased:
        return Casing(True, f"vocabulary {name} has no upper-case entries")
    examples = ", ".join(repr(e) for e in cased[:3])
    return Casing(False, f"vocabulary {name} has {len(cased)} upper-case entries ({examples} ...)")


# === Deciding ===


def choose_lowercase(lowercase: bool | None, detected: Casing, source: str) -> bool:
    """The detected value for `lowercase=None`; a given value must agree with it."""
    if lowercase is None:
        return detected.lowercase
    if bool(lowercase) != detected.lowercase:
        given = "lowercase=True (uncased)" if lowercase else "lowercase=False (cased)"
        raise ValueError(
            f"{given} contradicts {source}, which is {detected.describe()}; leave the "
            "casing out to use the checkpoint's, or give a checkpoint of the other casing"
        )
    return bool(lowercase)
