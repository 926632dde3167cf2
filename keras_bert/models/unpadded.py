"""The encoder with the padding taken out of its per-token work.

A batch of texts is padded to its longest (or to a fixed length), but only
attention mixes positions: the embeddings, the query / key / value and output
projections, the feed-forward layers, dropout and the LayerNorms treat every
position on its own, so on padding they compute values nobody reads. Here
those run on the real positions only, packed into rows (R, H), R = the real
tokens of the batch (`keras_bert.layers.packing.TokenPacking`); attention
puts its queries, keys and values back in the (B, T) layout for the masked
product, as the padded model does, cut at the batch's last real position. A
batch of 32 review sentences is about half padding when padded to its longest
(the inference benchmark's reviews: 51 % real), and 80 % at a fixed 128.

Every real position's outputs are the padded model's (the same products on
the same rows, so equal to float rounding); padded positions of
`sequence_output` and `encoder_outputs` come out 0. Position 0 ([CLS], which
the pooler reads) always counts as real. Gradients flow through the packing
(a gather), so training can use it too: a loss that reads only real positions
(classification, tagging with the padding weighted 0) gets the padded model's
gradients; dropout draws its masks over the packed rows instead.

Asked for by an argument of the call, never by a setting:
`encoder(features, remove_padding=True)`, or a task model's call
`model(features, remove_padding=True, read_positions=...)`, which Keras hands
on to the encoder inside the functional graph as it hands on `training`
(`BertEncoder.call`; its one forward pass is
`keras_bert.models.encoder.encoder_forward`). `TextTask`'s train / test /
predict steps pass them where their models allow it (`TextTask.step_arguments`),
exports trace their signatures with them (`export_saved_model(remove_padding=True)`).
Two replica threads, a traced function and a second model all see what their
own call says. `ModernBertEncoder` takes the same arguments (`UnpaddedCall`;
its forward pass `keras_bert.models.modernbert.modernbert_forward`), so the
task models built on it, its pretrainers and its exports skip the padding too.

Legend for shape comments: B = batch, T = sequence length, R = real
positions in the batch, H = hidden size, L = number of layers.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from keras_bert.layers.packing import TokenPacking
from keras_bert.layers.pooling import last_real_positions

# The call arguments of the unpadded forward pass (`BertEncoder.call`). The
# encoder and keras_bert's models register them as Keras call-context
# arguments: a model's call hands them on to the encoder inside it.
UNPADDED_CALL_ARGUMENTS = ("remove_padding", "read_positions")


def may_pack_padding(model) -> bool:
    """Whether `model`'s training step may pack the padding out: not where
    shapes must be static (XLA, TPUs), nor across workers (the embeddings'
    sparse gradients are all-gathered, which needs one shape on every worker)."""
    strategy = tf.distribute.get_strategy()
    static = (tf.distribute.TPUStrategy, tf.distribute.MultiWorkerMirroredStrategy)
    return not (bool(getattr(model, "jit_compile", False)) or isinstance(strategy, static))


def read_rows(
    read_positions: tf.Tensor, input_mask: tf.Tensor, attention: str = "bidirectional"
) -> tf.Tensor:
    """(B, T) int32, 1 at the real positions read and at the pooler's row (left to
    right the last real token; [CLS] `TokenPacking` keeps anyway)."""
    read = tf.not_equal(read_positions, 0) & tf.not_equal(input_mask, 0)
    if attention == "left_to_right":
        read |= last_real_positions(input_mask)
    return tf.cast(read, tf.int32)


def last_block_packing(
    packing: TokenPacking | None,
    read_positions: Any,
    input_mask: tf.Tensor,
    attention: str = "bidirectional",
) -> TokenPacking | None:
    """The rows of the last block's output (its queries): those `read_positions`
    reads and the pooler's (`read_rows`), over `packing`'s span; None (every
    real row) without `packing` or `read_positions`."""
    if packing is None or read_positions is None:
        return None
    return TokenPacking(read_rows(read_positions, input_mask, attention), span=packing.span)


def unpack_layers(
    layers: list,
    packing: TokenPacking | None,
    last_packing: TokenPacking | None = None,
    last: int = 1,
) -> list:
    """Each block's rows (R, H) back to (B, T, H), the padding 0; the `last`
    ones (the last block's output, and what follows it on the same rows)
    from `last_packing`'s rows where the last block ran on those alone."""
    if packing is None:
        return layers
    return [packing.unpack(layer) for layer in layers[:-last]] + [
        (last_packing or packing).unpack(layer) for layer in layers[-last:]
    ]


class UnpaddedCall:
    """The call of a functional encoder (`BertEncoder`, `ModernBertEncoder`)
    that may skip the padding: `remove_padding` / `read_positions` run its
    `forward_pass` on packed rows, else its functional graph."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Passed on by any functional model the encoder sits in, as Keras passes
        # `training`: `task_model(x, remove_padding=True)` reaches this `call`.
        self._register_call_context_args(*UNPADDED_CALL_ARGUMENTS)  # type: ignore[attr-defined]

    def forward_pass(self, inputs: Any, **arguments: Any) -> dict[str, Any]:
        raise NotImplementedError(f"{type(self).__name__} defines no forward_pass")

    def call(
        self,
        inputs: Any,
        training: bool | None = None,
        mask: Any = None,
        remove_padding: bool | None = None,
        read_positions: Any = None,
    ) -> Any:
        """The encoder's outputs (see the class docstring).

        `remove_padding=True`: the per-token layers skip the padding, the real
        positions' outputs unchanged, the padding's 0 (`keras_bert.models.unpadded`);
        `read_positions` (B, T), nonzero where the caller reads the last layer
        (besides the pooler's rows, always computed), narrows the last block to
        those rows, the other positions of its output 0 (a classifier reads only
        [CLS]: all zeros). Both are arguments of the call, never settings of the
        encoder, and a task model's call hands them on (Keras' call-context
        arguments): `model(features, remove_padding=True, read_positions=...)`.
        """
        if remove_padding:
            return self.forward_pass(
                inputs,
                packing=TokenPacking(inputs["input_mask"]),
                read_positions=read_positions,
                training=training,
            )
        if read_positions is not None:
            raise ValueError("read_positions narrows the unpadded call: pass remove_padding=True")
        return super().call(inputs, training=training, mask=mask)  # type: ignore[misc]

    def compute_output_spec(
        self,
        inputs: Any,
        training: bool | None = None,
        mask: Any = None,
        **call_context: Any,
    ) -> Any:
        # The same shapes either way (the padding's rows come back, as 0):
        # `call`'s `remove_padding` and `read_positions` change no shape.
        return super().compute_output_spec(  # type: ignore[misc]
            inputs, training=training, mask=mask
        )
