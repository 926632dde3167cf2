"""ModernBertEncoder: a ModernBERT-style encoder (Warner et al., 2024) as a
Keras 3 functional model, beside `BertEncoder`.

Token embeddings, LayerNorm, dropout (no position or segment embeddings:
rotary embeddings inside attention say where a token is), N pre-norm blocks
whose attention is global every `global_attn_every_n_layers` layers and a
sliding window in between, a final LayerNorm; the pooled output is
ModernBERT's classification head on [CLS] or the mean of the real tokens.

Padding: the mask bias hides padded keys from every query, and rotary
positions count from the first token, so a right-padded batch (BERT's
layout) gives each real position what the sequence alone gives. As
`BertEncoder`, the call `encoder(features, remove_padding=True)` (or a task
model's, which hands it on) runs every layer but attention on the real
tokens alone, packed into rows (R, H) (`keras_bert.models.unpadded`):
attention puts the heads back in the (B, S) layout, S = one past the
batch's last real position, where each row sits at its position in its
sequence (the rotary angles) and both mask biases, global and sliding
window, are the padded ones cut at S. `read_positions` narrows the last
block and the final LayerNorm to the rows a loss reads (with [CLS]
pooling; the mean reads every real row). The same values at every real
position, the padding's 0; the task models' steps, `ModernBertPretrainer`
(the last block at the masked positions) and the ELECTRA discriminator in
training take this path where shapes may vary (`may_pack_padding`).

Legend for shape comments: B = batch, T = sequence length, H = hidden size,
L = number of layers, R = real tokens in the batch.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping

import keras
import numpy as np

from keras_bert.checkpoints import modernbert as checkpoint
from keras_bert.checkpoints.source import PretrainedSource
from keras_bert.kernels import precision
from keras_bert.kernels.dropout import FastDropout
from keras_bert.kernels.layer_norm import FastLayerNorm
from keras_bert.layers.embeddings import AttentionMaskBias
from keras_bert.layers.modernbert_block import PreNormBlock, SlidingWindowMaskBias
from keras_bert.layers.modernbert_heads import PredictionHead, pool_tokens
from keras_bert.layers.packing import TokenPacking
from keras_bert.models.encoder import EncoderConfig
from keras_bert.models.unpadded import (
    UnpaddedCall,
    last_block_packing,
    unpack_layers,
)
from keras_bert.models.user_inputs import check_model_keywords
from keras_bert.modernbert_config import ModernBertConfig

# What the encoder reads: no segment ids (ModernBERT has no segment embeddings).
MODERNBERT_INPUTS = ("input_ids", "input_mask")


def norm_options(config: ModernBertConfig) -> dict[str, Any]:
    """What every block and head takes from the config alike: the LayerNorms'
    bias and epsilon, the initialiser's stddev."""
    return dict(
        norm_bias=config.norm_bias,
        norm_epsilon=config.norm_eps,
        initializer_range=config.initializer_range,
    )


def prediction_head_options(config: ModernBertConfig) -> dict[str, Any]:
    """A `PredictionHead`'s arguments from the config: the pooler's and the
    masked-LM head's (HuggingFace's `classifier_*` fields serve both)."""
    return dict(
        activation=config.classifier_activation,
        use_bias=config.classifier_bias,
        **norm_options(config),
    )


@keras.saving.register_keras_serializable(package="keras_bert")
class ModernBertEncoder(EncoderConfig, UnpaddedCall, keras.Model):
    """ModernBERT (Warner et al., 2024).

    Inputs: `input_ids`, `input_mask`, int32 of shape (B, T), right-padded.
    Outputs: a dict with `sequence_output` (B, T, H), the last block's output
    after the final LayerNorm; `pooled_output` (B, H), the prediction head on
    [CLS] or the mean (`config.classifier_pooling`); `encoder_outputs`, each
    block's (B, T, H) output (the residual stream, before the final norm).
    """

    # The inputs a task model built on the encoder gives it (`BertClassifier`).
    input_features = MODERNBERT_INPUTS

    def __init__(
        self,
        config: ModernBertConfig | dict,
        dtype: str | keras.DTypePolicy | None = None,
        fast_kernels: bool = True,
        **kwargs: Any,
    ) -> None:
        check_model_keywords(type(self), kwargs)  # Keras' functional model would drop them
        if isinstance(config, dict):
            config = ModernBertConfig.from_dict(config)
        dtype = precision.resolve_auto(dtype)
        fast: dict[str, Any] = {"fast_kernels": fast_kernels}
        norm: dict[str, Any] = {
            "epsilon": config.norm_eps,
            "center": config.norm_bias,
            "dtype": dtype,
            **fast,
        }

        # === Layers ===
        token_embedding = keras.layers.Embedding(
            config.vocab_size,
            config.hidden_size,
            embeddings_initializer=keras.initializers.TruncatedNormal(
                stddev=config.initializer_range
            ),
            dtype=dtype,
            name="token_embedding",
        )
        embeddings_layer_norm = FastLayerNorm(name="embeddings_layer_norm", **norm)
        embeddings_dropout = FastDropout(
            config.embedding_dropout, dtype=dtype, name="embeddings_dropout", **fast
        )
        global_mask_bias = AttentionMaskBias(dtype=dtype, name="global_attention_mask_bias")
        local_mask_bias = SlidingWindowMaskBias(
            config.window_radius, dtype=dtype, name="local_attention_mask_bias"
        )
        blocks = [
            PreNormBlock(
                config.num_attention_heads,
                config.intermediate_size,
                config.global_rope_theta if config.is_global_layer(i) else config.local_rope_theta,
                activation=config.hidden_activation,
                attention_norm=i > 0,  # the embeddings' LayerNorm feeds the first
                attention_bias=config.attention_bias,
                mlp_bias=config.mlp_bias,
                attention_dropout=config.attention_dropout,
                mlp_dropout=config.mlp_dropout,
                dtype=dtype,
                name=f"transformer_layer_{i}",
                **norm_options(config),
                **fast,
            )
            for i in range(config.num_hidden_layers)
        ]
        final_layer_norm = FastLayerNorm(name="final_layer_norm", **norm)
        pooler = PredictionHead(
            dtype=dtype, name="pooler", **prediction_head_options(config), **fast
        )

        # === Functional Model ===
        inputs = {
            name: keras.Input(shape=(None,), dtype="int32", name=name) for name in MODERNBERT_INPUTS
        }
        parts = ModernBertLayers(
            config,
            token_embedding,
            embeddings_layer_norm,
            embeddings_dropout,
            global_mask_bias,
            local_mask_bias,
            blocks,
            final_layer_norm,
            pooler,
        )
        super().__init__(inputs=inputs, outputs=modernbert_forward(parts, inputs), **kwargs)
        self.keep_layers(parts, fast_kernels)

    def forward_pass(self, inputs: Any, **arguments: Any) -> dict[str, Any]:
        """`modernbert_forward` on this encoder's layers (`UnpaddedCall.call`)."""
        return modernbert_forward(self, inputs, **arguments)

    @classmethod
    def from_pretrained(
        cls, folder: str | PretrainedSource, dtype: str | keras.DTypePolicy | None = None
    ) -> ModernBertEncoder:
        """The encoder of a HuggingFace ModernBERT folder (config.json +
        model.safetensors): `ModernBertModel`, or a task model's encoder (its
        pooler too where the checkpoint's head is a classifier's), or a
        `keras-bert pretrain` run's export/."""
        return load_encoder_and_heads(folder, dtype)[0]


@dataclasses.dataclass(frozen=True)
class ModernBertLayers:
    """What the forward pass reads; a built `ModernBertEncoder` has the same
    attributes (ELECTRA's generator: its own blocks on the encoder's embeddings)."""

    config: ModernBertConfig
    token_embedding: keras.layers.Embedding
    embeddings_layer_norm: FastLayerNorm
    embeddings_dropout: FastDropout
    global_attention_mask_bias: AttentionMaskBias
    local_attention_mask_bias: SlidingWindowMaskBias
    transformer_blocks: list
    final_layer_norm: FastLayerNorm
    pooler: PredictionHead


def modernbert_forward(
    parts: ModernBertLayers | ModernBertEncoder,
    inputs: Mapping[str, Any],
    *,
    packing: TokenPacking | None = None,
    read_positions: Any = None,
    training: bool | None = None,
) -> dict[str, Any]:
    """ModernBERT's forward pass: the token embeddings, LayerNorm, dropout,
    the blocks (global or local attention by `config.is_global_layer`), the
    final LayerNorm and the pooler: the encoder's outputs (see the class).

    With `packing` (`keras_bert.models.unpadded`) every layer but attention
    runs on the real positions only, (R, H), and both mask biases span the
    packing's S positions; `read_positions` (B, T) narrows the last block and
    the final LayerNorm to the rows a loss reads and the pooler's ([CLS]; with
    mean pooling every real row, so it narrows nothing)."""
    input_mask = inputs["input_mask"]
    input_ids = inputs["input_ids"] if packing is None else packing.pack(inputs["input_ids"])
    embeddings = parts.embeddings_layer_norm(parts.token_embedding(input_ids))
    hidden = parts.embeddings_dropout(embeddings, training=training)  # (B, T, H) / (R, H)
    mask = input_mask if packing is None else packing.attention_mask(input_mask)  # (B, T or S)
    mask_biases = {
        True: parts.global_attention_mask_bias(mask),
        False: parts.local_attention_mask_bias(mask),
    }
    pooling = parts.config.classifier_pooling
    last_packing = last_block_packing(
        packing, read_positions if pooling == "cls" else None, input_mask
    )
    layers = []
    for i, block in enumerate(parts.transformer_blocks):
        last = i == len(parts.transformer_blocks) - 1
        hidden = block(
            hidden,
            mask_biases[parts.config.is_global_layer(i)],
            packing=packing,
            query_packing=last_packing if last else None,
            training=training,
        )  # (B, T, H) / (R, H), the last (Q, H)
        layers.append(hidden)
    # The final LayerNorm on the last block's rows, then all back to (B, T, H), the padding 0.
    *layers, sequence_output = unpack_layers(
        layers + [parts.final_layer_norm(hidden)], packing, last_packing, last=2
    )
    pooled = parts.pooler(pool_tokens(sequence_output, input_mask, pooling))  # (B, H)
    return {
        "sequence_output": sequence_output,
        "pooled_output": pooled,
        "encoder_outputs": layers,
    }


def load_encoder_and_heads(
    folder: str | PretrainedSource, dtype: str | keras.DTypePolicy | None = None
) -> tuple[ModernBertEncoder, dict[str, np.ndarray], Mapping[str, Any]]:
    """`ModernBertEncoder.from_pretrained`, the task-head tensors left
    (HuggingFace names, `head.*`, `decoder.*`, ...) and the raw config.json."""
    if isinstance(folder, PretrainedSource):  # resolved: the folder of its weights
        folder = os.path.dirname(folder.weights)
    config, raw_config = checkpoint.read_config(folder)
    encoder = ModernBertEncoder(config, dtype=dtype)
    heads = checkpoint.assign_encoder_weights(
        encoder,
        checkpoint.read_tensors(folder),
        list(raw_config.get("architectures") or []),
        source=folder,
    )
    return encoder, heads, raw_config
