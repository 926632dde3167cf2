"""What a Keras user meets first: one output convention, Keras' loss
conventions, the public preprocessor, and inputs in the shapes users pass."""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf
from task_models import tiny_encoder

import keras_bert
from keras_bert import (
    BertClassifier,
    BertPreprocessor,
    BertSpanExtractor,
    BertTokenClassifier,
    BertTokenizer,
)
from keras_bert.assets import VOCAB_FILE

TEXTS = ["a gorgeous, witty movie", "dull and far too long", "fine", "Emma lives in Highbury"]
PAIRS = ["what a film", "not again", "yes", "where does Emma live?"]
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


@pytest.fixture(scope="module")
def model():
    return BertClassifier(
        tiny_encoder(0),
        2,
        label_names=["rotten", "fresh"],
        preprocessor=BertPreprocessor(VOCAB_FILE, seq_length=24),
    )


def ids_of(texts, pairs=None, seq_length=24):
    tokenizer = BertTokenizer(VOCAB_FILE)
    if pairs is None:
        return tokenizer.pack(tf.constant(texts), seq_length=seq_length)
    return tokenizer.pack(tf.constant(texts), tf.constant(pairs), seq_length)


def test_predict_gives_logits_for_text_as_for_ids(model):
    logits = model(ids_of(TEXTS), training=False).numpy()
    np.testing.assert_allclose(model.predict(TEXTS, verbose=0), logits, atol=1e-5)
    np.testing.assert_allclose(model.predict(ids_of(TEXTS), verbose=0), logits, atol=1e-5)
    exp = np.exp(logits - logits.max(-1, keepdims=True))
    np.testing.assert_allclose(
        model.predict_proba(TEXTS), exp / exp.sum(-1, keepdims=True), atol=1e-5
    )
    assert model.predict_labels(TEXTS) == [["rotten", "fresh"][i] for i in logits.argmax(-1)]


def test_softmax_activation_outputs_probabilities_and_its_loss_follows():
    model = BertClassifier(
        tiny_encoder(0),
        2,
        activation="softmax",
        preprocessor=BertPreprocessor(VOCAB_FILE, seq_length=24),
    )
    plain = BertClassifier(
        tiny_encoder(0), 2, preprocessor=BertPreprocessor(VOCAB_FILE, seq_length=24)
    )
    probabilities = model.predict(TEXTS, verbose=0)
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(probabilities, plain.predict_proba(TEXTS), atol=1e-5)
    np.testing.assert_allclose(model.predict_proba(TEXTS), probabilities, atol=1e-5)
    assert model.default_loss().get_config()["from_logits"] is False
    assert BertClassifier.from_config(model.get_config()).activation == "softmax"
    with pytest.raises(ValueError, match="activation must be one of"):
        BertClassifier(tiny_encoder(0), 1, activation="softmax")


@pytest.mark.parametrize(
    "loss",
    [
        keras.losses.SparseCategoricalCrossentropy(),
        "sparse_categorical_crossentropy",
        keras.losses.sparse_categorical_crossentropy,
        {"x": keras.losses.CategoricalCrossentropy()},
    ],
)
def test_a_loss_expecting_probabilities_on_logits_warns_at_compile(model, loss):
    with pytest.warns(UserWarning, match="outputs logits, but the loss .* expects probabilities"):
        model.compile(loss=loss)


def test_logits_losses_and_the_default_compile_quietly(model):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.compile()
    softmax = BertClassifier(tiny_encoder(0), 2, activation="softmax")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        softmax.compile(loss=keras.losses.SparseCategoricalCrossentropy())


def test_the_preprocessor_is_public_and_loads_a_checkpoints_settings(minilm_path):
    assert keras_bert.BertPreprocessor is BertPreprocessor
    from keras_bert.preprocessing import BertPreprocessor as from_subpackage

    assert from_subpackage is BertPreprocessor
    preprocessor = BertPreprocessor.from_pretrained(minilm_path, seq_length=16)
    assert preprocessor.seq_length == 16 and preprocessor.lowercase is True
    assert len(preprocessor.vocabulary) == 30522
    # The original tokenizer (tf-models-official's copy of google-research/bert's).
    from official.nlp.tools import tokenization

    original = tokenization.FullTokenizer(f"{minilm_path}/vocab.txt", do_lower_case=True)
    text = "Emma Woodhouse, handsome, clever, and rich"
    expected = original.convert_tokens_to_ids(["[CLS]"] + original.tokenize(text) + ["[SEP]"])
    ids = preprocessor([text])["input_ids"].numpy()[0]
    assert ids[: len(expected)].tolist() == expected and not ids[len(expected) :].any()
    assert BertPreprocessor.from_preset(minilm_path).seq_length == 128
    with pytest.raises(ValueError, match="exceeds"):
        BertPreprocessor.from_pretrained(minilm_path, seq_length=1024)


def test_predict_takes_a_dataset_of_text(model):
    texts = tf.data.Dataset.from_tensor_slices(TEXTS).batch(3)
    np.testing.assert_allclose(
        model.predict(texts, verbose=0), model.predict(TEXTS, verbose=0), atol=1e-5
    )
    with_labels = tf.data.Dataset.from_tensor_slices((TEXTS, [0, 1, 0, 1])).batch(2)
    np.testing.assert_allclose(
        model.predict(with_labels, verbose=0), model.predict(TEXTS, verbose=0), atol=1e-5
    )


def test_pairs_as_a_list_of_tuples(model):
    rows = list(zip(TEXTS, PAIRS))
    expected = model(ids_of(TEXTS, PAIRS), training=False).numpy()
    np.testing.assert_allclose(model.predict(rows, verbose=0), expected, atol=1e-5)
    np.testing.assert_allclose(model.predict((TEXTS, PAIRS), verbose=0), expected, atol=1e-5)
    assert model.predict_labels(rows) == model.predict_labels({"text": TEXTS, "text_pair": PAIRS})
    model.compile()
    model.fit(rows, ["fresh", "rotten", "fresh", "rotten"], epochs=1, verbose=0)
    with pytest.raises(ValueError, match=r"row 1 is not a \(text, text_pair\) tuple"):
        model.predict([("a", "b"), ("c",)])


def test_unequal_pairs_name_both_inputs(model):
    with pytest.raises(ValueError, match=r"one `text_pair` per `text`: got 4 texts and 2 pairs"):
        model.predict((TEXTS, PAIRS[:2]), verbose=0)
    with pytest.raises(ValueError, match=r"one `text_pair` per `text`: got 4 texts and 3 pairs"):
        model.predict_labels({"text": TEXTS, "text_pair": PAIRS[:3]})
    with pytest.raises(ValueError, match=r"one `text_pair` per `text`: got 2 texts and 1 pairs"):
        model.preprocessor((TEXTS[:2], PAIRS[:1]))
    # In a graph whose sizes are unknown until run, the assertion names them too.
    traced = tf.function(
        lambda a, b: model.preprocessor((a, b))["input_ids"],
        input_signature=[tf.TensorSpec([None], tf.string)] * 2,
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match="one `text_pair` per `text`"):
        traced(tf.constant(TEXTS), tf.constant(PAIRS[:2]))


def test_the_tagger_takes_label_names_alone_and_reports_entity_f1():
    tagger = BertTokenClassifier(
        tiny_encoder(3), label_names=TAGS, preprocessor=BertPreprocessor(VOCAB_FILE, seq_length=16)
    )
    assert tagger.num_labels == 5
    with pytest.raises(ValueError, match="needs label_names"):
        BertTokenClassifier(tiny_encoder(3))
    tagger.compile()
    words = [["Emma", "lives", "in", "Highbury"], ["Mr", "Knightley", "smiled"]]
    tags = [["B-PER", "O", "O", "B-LOC"], ["B-PER", "I-PER", "O"]]
    with warnings.catch_warnings():
        # Before, the unused pooler's missing gradients warned "did you forget a loss".
        warnings.filterwarnings("error", message="Gradients do not exist")
        history = tagger.fit(words, tags, epochs=1, verbose=0)
    assert "entity_f1" in history.history
    assert 0.0 <= history.history["entity_f1"][0] <= 1.0
    pooler = {id(w) for w in tagger.encoder.pooler.weights}
    assert not pooler & {id(w) for w in tagger.trainable_weights}
    logits = tagger.predict(words, verbose=0)
    assert logits.shape == (2, 16, 5)
    assert len(tagger.predict_entities(["Emma lives in Highbury"])) == 1


def test_the_span_extractor_checks_its_window_when_built():
    preprocessor = BertPreprocessor(VOCAB_FILE, seq_length=64)
    with pytest.raises(
        ValueError,
        match=r"seq_length \(64\) leaves no room .* max_query_length "
        r"\(64\).*smaller max_query_length=",
    ):
        BertSpanExtractor(tiny_encoder(4), preprocessor=preprocessor)
    reader = BertSpanExtractor(tiny_encoder(4), preprocessor=preprocessor, max_query_length=16)
    assert reader.span_finder().max_query_length == 16
    answers = reader.predict_answers(
        {"question": ["where does Emma live?"], "context": ["Emma lives in Highbury"]}
    )
    assert set(answers[0]) >= {"answer", "start", "end", "score"}
    assert BertSpanExtractor.from_config(reader.get_config()).max_query_length == 16


def test_lora_on_the_encoder_alone():
    encoder = tiny_encoder(7)
    inputs = ids_of(TEXTS, seq_length=16)
    before = encoder(inputs)["pooled_output"].numpy()
    encoder.enable_lora(4)
    assert encoder.lora_rank == 4
    trainable = encoder.trainable_weights
    assert trainable and all("lora_kernel" in w.path for w in trainable)
    np.testing.assert_allclose(encoder(inputs)["pooled_output"].numpy(), before, atol=1e-6)
    for layer in keras_bert.models.lora.lora_projections(encoder):
        layer.lora_kernel_b.assign(tf.random.normal(layer.lora_kernel_b.shape, stddev=0.1))
    adapted = encoder(inputs)["pooled_output"].numpy()
    merged = encoder.merge_lora()
    assert merged.lora_rank is None
    np.testing.assert_allclose(merged(inputs)["pooled_output"].numpy(), adapted, atol=1e-5)
