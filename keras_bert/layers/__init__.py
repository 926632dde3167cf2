from keras_bert.layers.activations import gelu_exact, get_activation
from keras_bert.layers.dropout import Dropout
from keras_bert.layers.embeddings import AttentionMaskBias, PositionEmbedding
from keras_bert.layers.normalization import LayerNormalization, layer_norm
from keras_bert.layers.transformer import SelfAttention, TransformerBlock
