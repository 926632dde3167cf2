"""keras_bert: BERT (Devlin et al., 2018) for TensorFlow and Keras 3."""

import os

# Keras 3 must run on TensorFlow: the tokenizer, tf.data and tf.distribute are TF.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# TensorFlow's C++ start-up chatter (no CUDA here, CPU features) hides real output.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from keras_bert.config import BertConfig  # noqa: E402
from keras_bert.models import BertEncoder  # noqa: E402
from keras_bert.models import (  # noqa: E402
    BertClassifier, BertFeatureExtractor, BertSpanExtractor, BertTokenClassifier)
from keras_bert.tokenizer import BertTokenizer  # noqa: E402

__version__ = "0.1.0"
