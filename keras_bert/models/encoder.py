"""BertEncoder: the BERT Transformer encoder as a Keras 3 functional model.

Legend for shape comments: B = batch, T = sequence length, H = hidden size,
L = number of layers, E = embedding size (ELECTRA's; H for BERT).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Mapping

import keras
import numpy as np

from keras_bert import safe_output
from keras_bert.checkpoints.load import assign_encoder_weights, encoder_variables, head_variables
from keras_bert.checkpoints.source import PretrainedSource, resolve
from keras_bert.config import BertConfig
from keras_bert.features import ENCODER_INPUTS
from keras_bert.kernels import precision
from keras_bert.kernels.dropout import FastDropout
from keras_bert.kernels.layer_norm import FastLayerNorm
from keras_bert.layers import AttentionMaskBias, PositionEmbedding, TransformerBlock
from keras_bert.layers.packing import TokenPacking
from keras_bert.layers.pooling import pooled_token
from keras_bert.models import lora
from keras_bert.models.unpadded import (
    UnpaddedCall,
    last_block_packing,
    unpack_layers,
)
from keras_bert.models.user_inputs import check_model_keywords

if TYPE_CHECKING:
    import tensorflow as tf

LAYER_NORM_EPSILON = 1e-12


class EncoderConfig:
    """get_config / from_config of a functional encoder built from a config
    dataclass (`BertEncoder`, `ModernBertEncoder`): the config, the kernels'
    choice and the layers' policy (a Functional model keeps none of its own,
    so a mixed-precision encoder reloads computing as it was built)."""

    token_embedding: Any
    config: Any
    fast_kernels: bool
    name: str
    trainable: bool

    def get_config(self) -> dict:
        policy = self.token_embedding.dtype_policy.name
        return {
            "config": self.config.to_dict(),
            "fast_kernels": self.fast_kernels,
            "dtype": None if policy == "float32" else policy,
            "name": self.name,
            "trainable": self.trainable,
        }

    @classmethod
    def from_config(cls, config: dict) -> Any:
        return cls(**config)

    def keep_layers(self, parts: Any, fast_kernels: bool) -> None:
        """Each field of `parts` (its layers dataclass: what the forward pass
        reads) as an attribute of the same name, the kernels' choice, and the
        layers' dtype policy as the model's own.

        Why the policy: Functional drops the `dtype` it is given and reports
        the global policy (float32) whatever its layers compute in. Set to the
        layers' own, `encoder.dtype_policy` is what the encoder computes in:
        the heads built from it (the masked-LM head, ELECTRA's) ran in float32
        beside a mixed_bfloat16 encoder, the masked-LM head's three
        (N, H) x (H, V) products included."""
        for field in dataclasses.fields(parts):
            setattr(self, field.name, getattr(parts, field.name))
        self.fast_kernels = fast_kernels
        self.dtype_policy = self.token_embedding.dtype_policy


@keras.saving.register_keras_serializable(package="keras_bert")
class BertEncoder(EncoderConfig, UnpaddedCall, keras.Model):
    """BERT (Devlin et al., 2018).

    `fast_kernels`: every layer on keras_bert's fast kernels (the default) or
    on the plain Keras / TensorFlow ops, the same values (`keras_bert.kernels`).

    Inputs: `input_ids`, `input_mask`, `segment_ids`, int32 of shape (B, T).
    Outputs: a dict with `sequence_output` (B, T, H), `pooled_output` (B, H)
    and `encoder_outputs`, a list of every layer's (B, T, H) output. The
    pooler reads [CLS]; left to right, [CLS] sees only itself, so it reads
    the last real token, the one that has seen the whole input (as GPT).
    """

    def __init__(
        self,
        config: BertConfig | dict,
        dtype: str | keras.DTypePolicy | None = None,
        fast_kernels: bool = True,
        **kwargs: Any,
    ) -> None:
        check_model_keywords(type(self), kwargs)  # Keras' functional model would drop them
        if isinstance(config, dict):
            config = BertConfig.from_dict(config)
        # "auto": this machine's native precision (keras_bert.kernels.precision).
        dtype = precision.resolve_auto(dtype)
        init = keras.initializers.TruncatedNormal(stddev=config.initializer_range)
        # The fast kernels or the plain ops in every layer (keras_bert.kernels.switch).
        fast = {"fast_kernels": fast_kernels}

        # === Layers ===
        token_embedding, segment_embedding = (
            keras.layers.Embedding(
                rows, config.embedding_width, embeddings_initializer=init, dtype=dtype, name=name
            )
            for rows, name in (
                (config.vocab_size, "token_embedding"),
                (config.type_vocab_size, "segment_embedding"),
            )
        )
        position_embedding = PositionEmbedding(
            config.max_position_embeddings, initializer=init, dtype=dtype, name="position_embedding"
        )
        embeddings_layer_norm = FastLayerNorm(
            epsilon=LAYER_NORM_EPSILON, dtype=dtype, name="embeddings_layer_norm", **fast
        )
        embeddings_dropout = FastDropout(
            config.hidden_dropout_prob, dtype=dtype, name="embeddings_dropout", **fast
        )
        # ELECTRA's narrower embeddings (E < H) projected up to the blocks'
        # width; BERT has none.
        embeddings_projection = None
        if config.embedding_size is not None:
            embeddings_projection = keras.layers.Dense(
                config.hidden_size,
                kernel_initializer=init,
                dtype=dtype,
                name="embeddings_projection",
            )
        mask_bias_layer = AttentionMaskBias(
            causal=config.attention == "left_to_right", dtype=dtype, name="attention_mask_bias"
        )
        blocks = [
            TransformerBlock(
                config.num_attention_heads,
                config.intermediate_size,
                activation=config.hidden_act,
                dropout=config.hidden_dropout_prob,
                attention_dropout=config.attention_probs_dropout_prob,
                initializer_range=config.initializer_range,
                layer_norm_epsilon=LAYER_NORM_EPSILON,
                dtype=dtype,
                name=f"transformer_layer_{i}",
                **fast,
            )
            for i in range(config.num_hidden_layers)
        ]
        pooler = keras.layers.Dense(
            config.hidden_size,
            activation="tanh",
            kernel_initializer=init,
            dtype=dtype,
            name="pooler",
        )

        # === Functional Model ===
        inputs = {
            name: keras.Input(shape=(None,), dtype="int32", name=name) for name in ENCODER_INPUTS
        }
        parts = EncoderLayers(
            config,
            token_embedding,
            segment_embedding,
            position_embedding,
            embeddings_layer_norm,
            embeddings_dropout,
            mask_bias_layer,
            blocks,
            pooler,
            embeddings_projection,
        )
        super().__init__(inputs=inputs, outputs=encoder_forward(parts, inputs), **kwargs)
        self.keep_layers(parts, fast_kernels)

    def forward_pass(self, inputs: Any, **arguments: Any) -> dict[str, Any]:
        """`encoder_forward` on this encoder's layers (`UnpaddedCall.call`)."""
        return encoder_forward(self, inputs, **arguments)

    def embed(
        self,
        input_ids: tf.Tensor,
        input_mask: tf.Tensor,
        segment_ids: tf.Tensor,
        training: bool | None = None,
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """The encoder's first stage, for models built from its layers (the
        frozen features): ids (B, T) -> the first block's input (B, T, H) and
        the attention mask bias (B, 1, 1, T)."""
        return embed_tokens(self, input_ids, input_mask, segment_ids, training=training)

    @classmethod
    def from_pretrained(
        cls, path: str | PretrainedSource, dtype: str | keras.DTypePolicy | None = None
    ) -> BertEncoder:
        """The encoder of any pretrained source `keras_bert.checkpoints.source.resolve`
        reads: a HuggingFace folder, an original TF1 folder or prefix, a `.keras`
        file, a `keras-bert finetune` output or a `keras-bert pretrain` model_dir."""
        return load_encoder_and_heads(path, dtype)[0]

    from_preset = from_pretrained  # keras-hub's name for the same loader

    # === LoRA (keras_bert.models.lora) ===

    def enable_lora(self, rank: int, alpha: float | None = None) -> None:
        """Low-rank adapters on the attention and feed-forward projections, the
        rest frozen: for an encoder inside a model of your own (task models
        have the same method)."""
        lora.enable_lora(self, rank, alpha)

    @property
    def lora_rank(self) -> int | None:
        return lora.lora_rank(self)

    def merge_lora(self) -> BertEncoder:
        """A copy without adapters, their product folded into the kernels."""
        return lora.merged_copy(self)


@dataclasses.dataclass(frozen=True)
class EncoderLayers:
    """What the forward pass reads; a built `BertEncoder` has the same attributes."""

    config: BertConfig
    token_embedding: keras.layers.Embedding
    segment_embedding: keras.layers.Embedding
    position_embedding: PositionEmbedding
    embeddings_layer_norm: FastLayerNorm
    embeddings_dropout: FastDropout
    attention_mask_bias: AttentionMaskBias
    transformer_blocks: list
    pooler: keras.layers.Dense
    embeddings_projection: keras.layers.Dense | None = None  # ELECTRA's E -> H


def embed_tokens(
    parts: EncoderLayers | BertEncoder,
    input_ids: Any,
    input_mask: Any,
    segment_ids: Any,
    packing: TokenPacking | None = None,
    training: bool | None = None,
) -> tuple[Any, Any]:
    """ids (B, T) -> the first block's input (B, T, H) and the attention mask
    bias (B, 1, 1, T); with `packing`, the real positions' rows (R, H) and the
    bias over the packing's span (B, 1, 1, S)."""
    if packing is not None:
        input_ids, segment_ids = packing.pack(input_ids), packing.pack(segment_ids)  # (R,)
    tokens = parts.token_embedding(input_ids)  # (B, T, H) or (R, H)
    embeddings = (
        tokens
        + parts.segment_embedding(segment_ids)
        + parts.position_embedding(tokens, positions=None if packing is None else packing.positions)
    )
    hidden = parts.embeddings_dropout(parts.embeddings_layer_norm(embeddings), training=training)
    if parts.embeddings_projection is not None:  # ELECTRA: (B, T, E) -> (B, T, H)
        hidden = parts.embeddings_projection(hidden)
    mask = input_mask if packing is None else packing.attention_mask(input_mask)
    return hidden, parts.attention_mask_bias(mask)


def encoder_forward(
    parts: EncoderLayers | BertEncoder,
    inputs: Mapping[str, Any],
    *,
    packing: TokenPacking | None = None,
    read_positions: Any = None,
    query_positions: Any = None,
    training: bool | None = None,
) -> dict[str, Any]:
    """BERT's forward pass, the one every path runs: embeddings, the blocks, the pooler.

    The encoder's functional graph calls it with symbolic inputs; with
    `packing` (`keras_bert.models.unpadded`) the per-token layers run on the
    real positions only, and `read_positions` (B, T) narrows the last block
    to the rows a loss reads; with `query_positions` (B, Q) the last block
    runs there only and the result is {"sequence_output": (B, Q, H)} (the
    pretrainer's [CLS] and masked positions). Otherwise the encoder's outputs:
    `sequence_output` (B, T, H), `pooled_output` (B, H), `encoder_outputs`.
    """
    input_mask = inputs["input_mask"]
    hidden, mask_bias = embed_tokens(
        parts, inputs["input_ids"], input_mask, inputs["segment_ids"], packing, training
    )
    *blocks, last_block = parts.transformer_blocks
    layers = []
    for block in blocks:
        hidden = block(hidden, mask_bias, packing=packing, training=training)  # (B, T, H) / (R, H)
        layers.append(hidden)
    if query_positions is not None:
        return {
            "sequence_output": last_block(
                hidden, mask_bias, query_positions=query_positions, training=training
            )
        }  # (B, Q, H)
    # The last block's own output rows (a loss's read positions), or all of them.
    last_packing = last_block_packing(packing, read_positions, input_mask, parts.config.attention)
    layers.append(
        last_block(
            hidden, mask_bias, packing=packing, query_packing=last_packing, training=training
        )
    )
    layers = unpack_layers(layers, packing, last_packing)  # back to (B, T, H), the padding 0
    pooled = parts.pooler(pooled_token(layers[-1], input_mask, parts.config.attention))  # (B, H)
    return {"sequence_output": layers[-1], "pooled_output": pooled, "encoder_outputs": layers}


# === Pretrained weights ===


def load_encoder_and_heads(
    path: str | PretrainedSource, dtype: str | keras.DTypePolicy | None = None
) -> tuple[BertEncoder, dict[str, np.ndarray]]:
    """`BertEncoder.from_pretrained`, and the source's head tensors (BERT's
    `cls/...` for `BertPretrainer`, ELECTRA's for `keras_bert.models.electra`;
    original layouts; a dict, maybe empty)."""
    source = path if isinstance(path, PretrainedSource) else resolve(path)
    if source.kind in ("huggingface", "tf1"):
        tensors = source.read_tensors()
    else:
        tensors = _keras_model_tensors(source.weights)
    encoder = BertEncoder(source.bert_config(), dtype=dtype)
    heads = assign_encoder_weights(
        encoder, tensors, source=source.weights, untrained=source.untrained
    )
    return encoder, heads


def _keras_model_tensors(path):
    """Canonical tensors of the BertEncoder in a .keras file (and of a
    pretrainer's heads), so every source reaches the encoder the same way."""
    model = keras.models.load_model(path, compile=False)
    encoder = model if isinstance(model, BertEncoder) else getattr(model, "encoder", None)
    if not isinstance(encoder, BertEncoder):
        raise ValueError(
            f"{path}: holds a {type(model).__name__}, neither a BertEncoder "
            "nor a model with an `encoder`"
        )
    tensors = {
        name: keras.ops.convert_to_numpy(variable)
        for name, variable in encoder_variables(encoder).items()
    }
    if hasattr(model, "masked_lm_head"):
        for name, (variable, transposed) in head_variables(model).items():
            value = keras.ops.convert_to_numpy(variable)
            tensors[name] = value.T if transposed else value
    return tensors


def convert_checkpoint(checkpoint: str, output_path: str) -> str:
    """Writes any pretrained source's encoder as a Keras `.keras` file; returns its path."""
    if not output_path.endswith(".keras"):
        raise ValueError(f"--output must end in .keras, got {output_path}")
    safe_output.check_not_input(output_path, [checkpoint], "--output")
    encoder = BertEncoder.from_pretrained(checkpoint)
    # Written under a temporary name (Keras wants the .keras ending) and
    # renamed: a crash never leaves a file that looks complete.
    with safe_output.replacing(output_path, keep_extension=True) as partial:
        encoder.save(partial)
    return output_path
