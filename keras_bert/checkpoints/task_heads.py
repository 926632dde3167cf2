"""The fine-tuned heads of google-research/bert's own scripts, into our task models.

run_classifier.py saves its classifier as `output_weights` (num_labels, H) and
`output_bias` (num_labels,), applied to the pooled output as
`pooled @ output_weights^T + output_bias`; run_squad.py saves
`cls/squad/output_weights` (2, H) and `cls/squad/output_bias` (2,), applied to
every token, row 0 giving the start logits and row 1 the end logits. Our heads
are Dense layers with (H, C) kernels: the same numbers, transposed.

The task models live a layer up, so a model is read by its layers' names:
`classifier_output` (BertClassifier's Dense) and `span_head` (BertSpanExtractor's
SpanHead, whose Dense kernel's columns are start and end).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

from keras_bert.checkpoints.source import PretrainedSource, resolve

if TYPE_CHECKING:
    import keras

CLASSIFIER_HEAD = ("output_weights", "output_bias")
SQUAD_HEAD = ("cls/squad/output_weights", "cls/squad/output_bias")


def load_original_task_head(model: keras.Model, source: str | PretrainedSource) -> list[str]:
    """Copies the fine-tuned head of an original run_classifier.py or
    run_squad.py checkpoint into `model` (a BertClassifier or BertSpanExtractor
    built on its encoder); returns the tensor names loaded, [] where the
    checkpoint holds no head this model has (a pretrained-only checkpoint,
    another task's head, a source other than a TF1 checkpoint).

    A head whose shape does not fit the model is a ValueError naming the
    checkpoint, the tensor, both shapes and what to pass; nothing is assigned then.
    """
    source = source if isinstance(source, PretrainedSource) else resolve(source)
    if source.kind != "tf1":
        return []
    target = _head_dense(model)
    if target is None:
        return []
    dense, names, setting = target
    reader = tf.train.load_checkpoint(source.weights)
    present = [name for name in names if reader.has_tensor(name)]
    if not present:
        return []
    if len(present) < len(names):
        missing = sorted(set(names) - set(present))
        raise ValueError(
            f"{source.weights}: has {present[0]} but not {missing[0]}; "
            "an incomplete fine-tuned checkpoint?"
        )
    weights, bias = (np.asarray(reader.get_tensor(name)) for name in names)
    kernel_shape = tuple(dense.kernel.shape)  # (H, C)
    hidden, classes = kernel_shape
    if weights.ndim != 2 or weights.shape[1] != hidden:
        raise ValueError(
            f"{source.weights}: tensor {names[0]} has shape {weights.shape}, "
            f"not (labels, {hidden}) for the encoder's hidden size {hidden}"
        )
    if weights.shape[0] != classes:
        raise ValueError(
            f"{source.weights}: tensor {names[0]} has shape {weights.shape} ({weights.shape[0]} "
            f"labels) but the model's {dense.name} kernel is {kernel_shape} ({classes} outputs); "
            + (
                f"pass {setting}={weights.shape[0]} to use the checkpoint's fine-tuned head, "
                f"or build the model on BertEncoder.from_pretrained(...) for a new {classes}-class "
                "head"
                if setting
                else "run_squad.py writes (2, hidden)"
            )
        )
    if bias.shape != (classes,):
        raise ValueError(
            f"{source.weights}: tensor {names[1]} has shape {bias.shape} but the "
            f"model's {dense.name} bias is ({classes},)"
        )
    dense.kernel.assign(weights.T.astype(dense.kernel.dtype))
    dense.bias.assign(bias.astype(dense.bias.dtype))
    return list(names)


def _head_dense(model):
    """(the Dense layer, the checkpoint's names for it, the model argument that
    sets its width) of the task head an original script trains; None for others."""
    layers = {layer.name: layer for layer in model.layers}
    if "classifier_output" in layers:
        return layers["classifier_output"], CLASSIFIER_HEAD, "num_classes"
    # run_squad.py's head reads the encoder's tokens; behind a (new) BiLSTM the
    # same weights would read other features, so that head stays fresh.
    if "span_head" in layers and "span_bilstm" not in layers:
        return layers["span_head"].dense, SQUAD_HEAD, None
    return None
