"""The paper's layers: embeddings, the post-LN Transformer block, the heads.
Their projections, LayerNorms and dropouts are keras_bert.kernels' fast layers,
which run Keras' own ops when the fast kernels are switched off."""

from keras_bert._lazy import submodule_getattr  # noqa: E402
from keras_bert.layers.activations import get_activation  # noqa: F401
from keras_bert.layers.embeddings import AttentionMaskBias, PositionEmbedding  # noqa: F401
from keras_bert.layers.transformer import SelfAttention, TransformerBlock  # noqa: F401

__getattr__ = submodule_getattr(__name__, __path__)
