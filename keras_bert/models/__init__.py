from keras_bert.models.classifier import BertClassifier
from keras_bert.models.encoder import BertEncoder
from keras_bert.models.feature_extractor import BertFeatureExtractor
from keras_bert.models.sentence_encoder import BertSentenceEncoder
from keras_bert.models.span_extractor import BertSpanExtractor
from keras_bert.models.token_classifier import BertTokenClassifier

__all__ = [
    "BertClassifier",
    "BertEncoder",
    "BertFeatureExtractor",
    "BertSentenceEncoder",
    "BertSpanExtractor",
    "BertTokenClassifier",
]

from keras_bert._lazy import submodule_getattr  # noqa: E402

__getattr__ = submodule_getattr(__name__, __path__)
