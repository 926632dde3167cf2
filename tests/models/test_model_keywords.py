"""A keyword a model does not take is refused, naming it and the accepted ones,
as Keras' own layers refuse theirs: Keras' functional model constructor used to
drop it without a word (a keyword meant for another library, such as
HuggingFace's `problem_type=`, built a plain classifier; a misspelt
`label_name=` was lost). Keras' own `name` and
`trainable` keep working, through a `.keras` round trip too."""

import keras
import numpy as np
import pytest

from keras_bert import (
    BertClassifier,
    BertEncoder,
    BertFeatureExtractor,
    BertSentenceEncoder,
    BertSpanExtractor,
    BertTokenClassifier,
)
from keras_bert.models.pretrainer import BertPretrainer

from harness import tiny_config

# Each model with the arguments it needs, and one of its own keywords.
MODELS = {
    BertClassifier: ({"num_classes": 2}, "label_names"),
    BertTokenClassifier: ({"num_labels": 3}, "head_layers"),
    BertSpanExtractor: ({}, "max_answer_length"),
    BertSentenceEncoder: ({}, "pooling"),
    BertFeatureExtractor: ({"num_top_layers": 1}, "num_top_layers"),
    BertPretrainer: ({}, "objective"),
}


@pytest.fixture(scope="module")
def encoder():
    return BertEncoder(tiny_config())


@pytest.mark.parametrize("model_class", list(MODELS), ids=lambda c: c.__name__)
def test_an_unknown_keyword_is_refused_naming_the_accepted_ones(encoder, model_class):
    arguments, own = MODELS[model_class]
    with pytest.raises(ValueError) as refused:
        model_class(encoder, **arguments, no_such_option=5)
    message = str(refused.value)
    assert message.startswith(
        f"Unrecognized keyword argument(s) passed to {model_class.__name__}: ['no_such_option']"
    )
    for accepted in (own, "name", "trainable"):
        assert repr(accepted) in message


def test_a_classifier_option_it_lacks_or_a_misspelt_one_is_refused(encoder):
    with pytest.raises(ValueError, match=r"\['problem_type'\]; it takes \[.*'multi_label'"):
        BertClassifier(encoder, num_classes=2, problem_type="multi_label_classification")
    with pytest.raises(ValueError, match=r"\['label_name'\]"):
        BertClassifier(encoder, num_classes=2, label_name=["neg", "pos"])
    with pytest.raises(ValueError, match="computes in its encoder's dtype"):
        BertClassifier(encoder, num_classes=2, dtype="float16")


def test_the_encoder_refuses_unknown_keywords(encoder):
    with pytest.raises(ValueError, match=r"passed to BertEncoder: \['hidden_size'\]; it takes"):
        BertEncoder(tiny_config(), hidden_size=64)


@pytest.mark.parametrize("model_class", [BertClassifier, BertSentenceEncoder])
def test_from_pretrained_refuses_before_loading_anything(model_class):
    """Checked first: the path does not even exist."""
    with pytest.raises(ValueError) as refused:
        model_class.from_pretrained("/nowhere/at/all", label_name=["a", "b"], seq_lenght=64)
    message = str(refused.value)
    assert f"passed to {model_class.__name__}.from_pretrained: ['label_name', 'seq_lenght']" in (
        message
    )
    assert "'seq_length'" in message and "'dtype'" in message


def test_keras_name_and_trainable_still_work_and_reload(encoder, tmp_path):
    model = BertClassifier(encoder, num_classes=2, name="sentiment", trainable=False)
    assert model.name == "sentiment" and not model.trainable
    model.save(tmp_path / "sentiment.keras")
    again = keras.models.load_model(tmp_path / "sentiment.keras")
    assert again.name == "sentiment" and not again.trainable
    ids = {
        "input_ids": np.array([[2, 5, 7, 3]], np.int32),
        "input_mask": np.ones((1, 4), np.int32),
        "segment_ids": np.zeros((1, 4), np.int32),
    }
    np.testing.assert_allclose(again.predict(ids, verbose=0), model.predict(ids, verbose=0))
    assert BertEncoder(tiny_config(), name="my_encoder").name == "my_encoder"
