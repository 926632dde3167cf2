from keras_bert.layers.activations import gelu_exact, get_activation
from keras_bert.kernels.dropout import Dropout
from keras_bert.layers.embeddings import AttentionMaskBias, PositionEmbedding
from keras_bert.kernels.layer_norm import LayerNormalization, layer_norm
from keras_bert.layers.transformer import SelfAttention, TransformerBlock

from keras_bert._lazy import submodule_getattr  # noqa: E402

__getattr__ = submodule_getattr(__name__, __path__)
