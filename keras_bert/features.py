"""The one place where feature names, their dtypes and shapes, and the
pretraining objectives are defined.

Names are those of google-research/bert's `create_pretraining_data.py` and
`run_pretraining.py`, so original TFRecords and ours are interchangeable; the
same names key `keras.Input`s, dataset elements and SavedModel signatures.
tf.Example stores only int64 and float32; readers cast ids to int32 after parsing.

TensorFlow is imported inside the functions that need it: the data commands
read these names without paying for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    import tensorflow as tf

ENCODER_INPUTS = ("input_ids", "input_mask", "segment_ids")
MASKED_LM_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")
NEXT_SENTENCE_LABELS = "next_sentence_labels"

# "nsp": next sentence (50 % random B); "sop": sentence order (ALBERT), same
# head and labels; "none": masked LM alone (RoBERTa).
OBJECTIVES = ("nsp", "sop", "none")
# What a pretrainer can train besides: "lm", next-token prediction at every
# position of a left-to-right encoder (the paper's "LTR & No NSP"), from the
# same records (`keras_bert.pretraining_data.next_token`).
PRETRAINER_OBJECTIVES = OBJECTIVES + ("lm",)
# What a pretraining run can train: also "electra", replaced-token detection
# (`keras_bert.models.electra_pretrainer`), from the masked-LM records.
PRETRAINING_RUN_OBJECTIVES = PRETRAINER_OBJECTIVES + ("electra",)


def pretraining_feature_spec(
    seq_length: int,
    max_predictions_per_seq: int,
    with_next_sentence: bool = True,
    with_masked_lm: bool = True,
) -> dict[str, tf.io.FixedLenFeature]:
    """Parsing spec of one pretraining example, as `run_pretraining.py` reads it.

    `with_masked_lm=False`: the unmasked records that `create-pretraining-data
    --no-mask` writes for dynamic masking (no masked_lm_* features).
    """
    import tensorflow as tf

    spec = {name: tf.io.FixedLenFeature([seq_length], tf.int64) for name in ENCODER_INPUTS}
    if with_masked_lm:
        spec["masked_lm_positions"] = tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64)
        spec["masked_lm_ids"] = tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64)
        spec["masked_lm_weights"] = tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32)
    if with_next_sentence:
        spec[NEXT_SENTENCE_LABELS] = tf.io.FixedLenFeature([1], tf.int64)
    return spec


def int64_feature(values: Iterable[int]) -> tf.train.Feature:
    import tensorflow as tf

    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def float_feature(values: Iterable[float]) -> tf.train.Feature:
    import tensorflow as tf

    return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))


# What a `keras-bert finetune` run writes in its output folder: the command line
# refuses an output folder holding one of the run's inputs under these names.
FINETUNE_OUTPUT_FILES = (
    "model.keras",
    "vocab.txt",
    "finetune_config.json",
    "dev_results.json",
    "lora_weights.npz",
    "search_results.md",
    "checkpoints",
    "logs",
    "runs",
)
