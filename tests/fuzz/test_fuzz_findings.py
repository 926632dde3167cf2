"""What the fuzzer found, one plain test each (the properties in
test_fuzz_*.py would find them again, but only by chance and after
shrinking): each input, and the clear error it now gets."""

import os

import keras
import numpy as np
import pytest

from keras_bert import BertClassifier, BertEncoder, BertPreprocessor
from keras_bert.models import user_inputs
from keras_bert.training import finetuning, pretraining

from conftest import TINY_VOCAB
from harness import run_command, tiny_config


@pytest.fixture(scope="module")
def classifier():
    model = BertClassifier(
        BertEncoder(tiny_config(vocab_size=len(TINY_VOCAB))),
        2,
        label_names=["neg", "pos"],
        preprocessor=BertPreprocessor(TINY_VOCAB, seq_length=8),
    )
    model.compile(jit_compile=False)
    return model


def test_a_lone_surrogate_is_read_as_the_replacement_character(classifier):
    """Was: "Error converting unicode string while converting Python sequence to
    Tensor". Now read as the bytes a server receives: U+FFFD, which the
    tokenizer drops as the original does."""
    surrogate = classifier.predict(["the fox", "the\ud800 dog"], verbose=0)
    replaced = classifier.predict(["the fox", "the\ufffd dog"], verbose=0)
    np.testing.assert_allclose(surrogate, replaced, atol=1e-6)


@pytest.mark.parametrize(
    "rows, message",
    [
        ([None], r"`x`\[0\] is None, not a string"),  # was: KeyError 'pop from an empty set'
        ([0], r"`x`\[0\] is a int \(0\), not a string"),  # was: "Unrecognized data type"
        (np.array([None, 1.5], dtype=object), r"`x`\[0\] is None"),
    ],
)
def test_a_list_without_any_text_is_named_by_position(classifier, rows, message):
    with pytest.raises(ValueError, match=message):
        classifier.predict(rows, verbose=0)


def test_an_empty_side_of_a_pair_is_named(classifier):
    """Was: TypeError "`text` must hold strings, got float32 values"."""
    with pytest.raises(ValueError, match=r"`x\['text'\]` is empty"):
        classifier.predict({"text": [], "text_pair": []}, verbose=0)
    with pytest.raises(ValueError, match=r"`x\[1\] \(pairs\)` is empty"):
        classifier.predict((["the fox"], []), verbose=0)
    # Was: KeyError 'pop from an empty set' (two empty lists read as features).
    with pytest.raises(ValueError, match=r"`x\[0\] \(texts\)` is empty"):
        classifier.predict(([], []), verbose=0)


@pytest.mark.parametrize("x", [[[]], ([], [0])])
def test_python_lists_inside_a_list_name_the_forms_taken(classifier, x):
    """Was: Keras' "Unrecognized data type" (fit) or KeyError (predict)."""
    with pytest.raises(ValueError, match=r"`x`: a BertClassifier takes texts"):
        classifier.fit(x, [0], verbose=0)
    with pytest.raises(ValueError, match=r"`x`: a BertClassifier takes texts"):
        classifier.predict(x, verbose=0)


def test_one_hot_labels_are_named_with_what_to_pass(classifier):
    """Was: Keras' message about the loss' ranks, after tracing."""
    with pytest.raises(ValueError, match=r"`y` has shape \(2, 2\).*y.argmax\(axis=-1\)"):
        classifier.fit(["the fox", "a dog"], np.eye(2), verbose=0)
    classifier.fit(["the fox", "a dog"], np.array([[0], [1]]), verbose=0)  # (N, 1) is one per text


def test_one_hot_labels_reach_a_loss_of_the_users_own():
    model = BertClassifier(
        BertEncoder(tiny_config(vocab_size=len(TINY_VOCAB))),
        2,
        preprocessor=BertPreprocessor(TINY_VOCAB, seq_length=8),
    )
    model.compile(loss=keras.losses.CategoricalCrossentropy(from_logits=True), jit_compile=False)
    history = model.fit(["the fox", "a dog"], np.eye(2), verbose=0)
    assert np.isfinite(history.history["loss"]).all()


def test_one_label_per_text(classifier):
    """Was: "the arrays have different numbers of rows: []"."""
    with pytest.raises(ValueError, match=r"`y` has 1 labels for 2 texts: pass one label per text"):
        classifier.fit(["the fox", "a dog"], [0], verbose=0)
    with pytest.raises(ValueError, match=r"`y` has 3 labels for 2 texts"):
        classifier.evaluate(["the fox", "a dog"], ["neg", "pos", "pos"], verbose=0)


def test_features_as_a_list_of_arrays_still_reach_keras():
    user_inputs.refuse_rows_that_are_not_text([np.zeros((2, 4)), np.zeros((2, 4))])


@pytest.mark.parametrize(
    "item, message",
    [
        ("verbose=null", "config field verbose takes no null: give auto, 0, 1 or 2"),
        ("learning_rate=null", "config field learning_rate takes no null: give a number"),
        ("seed=~", "config field seed takes no null: give an integer"),
    ],
)
def test_null_only_where_a_field_takes_it(item, message):
    """Was: accepted, then a TypeError (a traceback) where the value is read."""
    with pytest.raises(ValueError, match=rf"^--set {item}: {message}$"):
        pretraining.load_config(None, [item], train_files="a", model_dir="b")
    with pytest.raises(ValueError, match=rf"^--set {item}: {message}$"):
        finetuning.load_finetune_config(None, [item], task="classify")


def test_fields_that_take_null_still_do():
    config = pretraining.load_config(
        None, ["clipnorm=null", "eval_files=null", "attention=null"], train_files="a", model_dir="b"
    )
    assert (config.clipnorm, config.eval_files, config.attention) == (None, None, None)
    assert (
        finetuning.load_finetune_config(
            None, ["clipnorm=null", "lowercase=null"], task="classify"
        ).clipnorm
        is None
    )
    # mixed_precision null: float32 (distribute.PRECISIONS), as before.
    assert (
        pretraining.load_config(
            None, ["mixed_precision=null"], train_files="a", model_dir="b"
        ).mixed_precision
        is None
    )
    # model null: the init_checkpoint's own config.
    assert (
        pretraining.load_config(
            None, ["model=null"], train_files="a", model_dir="b", init_checkpoint="phase1/export"
        ).model
        is None
    )


def test_a_null_model_needs_an_init_checkpoint():
    """Was: accepted, then AttributeError: 'NoneType' object has no attribute 'endswith'."""
    with pytest.raises(
        ValueError, match="config field model is required .* unless init_checkpoint is given"
    ):
        pretraining.load_config(None, ["model=null"], train_files="a", model_dir="b")


def test_a_refused_command_leaves_no_output_folder(tmp_path, capsys):
    """Was: the folders made to hold the output's lock (`x/y/` of
    `--output x/y/1`) stayed, empty, after the command was refused."""
    code = run_command(
        "export --model-dir {model_dir} --output {output}",
        model_dir=tmp_path / "absent",
        output=tmp_path / "x" / "y" / "1",
    )
    assert code == 2 and "absent" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == []
