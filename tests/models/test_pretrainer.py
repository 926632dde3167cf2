"""BertPretrainer: head sizes, logits and losses against independent references,
fit on dataset dicts without a loss argument, head-weight loading."""

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert import checkpoints
from keras_bert.config import BertConfig
from keras_bert.layers.pretraining_heads import MaskedLMHead, NextSentenceHead
from keras_bert.models.encoder import BertEncoder
from keras_bert.models.pretrainer import BertPretrainer
from keras_bert.pretraining_data import inputs

from harness import assert_same_gradients, layer_policies, tiny_config
from synthetic_pretraining import write_records

TINY = tiny_config(vocab_size=32, hidden_size=16, intermediate_size=32, max_position_embeddings=16)


def batch_of(path, size=8):
    dataset = inputs.pretraining_dataset(str(path), 16, 4, size, is_training=False)
    return next(iter(dataset))


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    return write_records(tmp_path_factory.mktemp("data") / "train.tfrecord", 32)


def test_base_head_sizes_are_those_of_the_original():
    base = BertConfig.preset("base")
    table = keras.layers.Embedding(base.vocab_size, base.hidden_size)
    table.build((None, None))
    masked_lm = MaskedLMHead(table)
    masked_lm.build((None, None, base.hidden_size), (None, 20))
    next_sentence = NextSentenceHead()
    next_sentence.build((None, base.hidden_size))
    # MLM: dense 768x768 + 768, LayerNorm 2x768, output bias 30,522; the
    # output projection is the (tied) embedding table, no weights of its own.
    assert masked_lm.count_params() - table.count_params() == 768 * 768 + 768 + 2 * 768 + 30522
    assert masked_lm.count_params() - table.count_params() == 622650
    assert next_sentence.count_params() == 768 * 2 + 2 == 1538


@pytest.mark.slow
def test_base_pretrainer_adds_exactly_the_heads():
    encoder = BertEncoder(BertConfig.preset("base"))
    pretrainer = BertPretrainer(encoder, objective="nsp")
    assert encoder.count_params() == 109482240
    assert pretrainer.count_params() - encoder.count_params() == 622650 + 1538
    assert len({id(w) for w in pretrainer.weights}) == len(pretrainer.weights)


def test_masked_lm_logits_match_model_garden(records):
    import tf_keras
    from official.nlp.modeling.layers import MaskedLM

    pretrainer = BertPretrainer(BertEncoder(TINY))
    batch = batch_of(records)
    outputs = pretrainer(batch)
    encoded = pretrainer.encoder({k: batch[k] for k in ("input_ids", "input_mask", "segment_ids")})
    table = tf.Variable(pretrainer.encoder.token_embedding.embeddings.numpy())
    reference = MaskedLM(table, activation=tf_keras.activations.gelu, output="logits")
    reference(encoded["sequence_output"], batch["masked_lm_positions"])
    head = pretrainer.masked_lm_head
    reference.dense.set_weights([head.dense.kernel.numpy(), head.dense.bias.numpy()])
    reference.layer_norm.set_weights([head.layer_norm.gamma.numpy(), head.layer_norm.beta.numpy()])
    reference.bias.assign(np.random.default_rng(0).normal(size=(TINY.vocab_size,)))
    head.output_bias.assign(reference.bias.numpy())
    expected = reference(encoded["sequence_output"], batch["masked_lm_positions"])
    outputs = pretrainer(batch)
    np.testing.assert_allclose(outputs["masked_lm_logits"], expected, rtol=1e-5, atol=1e-5)
    dense = pretrainer.next_sentence_head.dense
    np.testing.assert_allclose(
        outputs["next_sentence_logits"],
        encoded["pooled_output"].numpy() @ dense.kernel.numpy() + dense.bias.numpy(),
        rtol=1e-5,
        atol=1e-6,
    )


def test_last_block_at_cls_and_masked_positions_only_changes_nothing(records):
    # The pretrainer runs its last block only at [CLS] and the masked positions;
    # logits, loss and every gradient must equal the whole encoder's path.
    pretrainer = BertPretrainer(BertEncoder(dataclasses.replace(TINY, num_hidden_layers=3)))
    pretrainer.compile(optimizer="sgd")
    batch = batch_of(records)
    encoder_inputs = {k: batch[k] for k in ("input_ids", "input_mask", "segment_ids")}

    def whole_encoder_path():
        encoded = pretrainer.encoder(encoder_inputs)
        return {
            "masked_lm_logits": pretrainer.masked_lm_head(
                encoded["sequence_output"], batch["masked_lm_positions"]
            ),
            "next_sentence_logits": pretrainer.next_sentence_head(encoded["pooled_output"]),
        }

    gradients = []
    for forward in (lambda: pretrainer(batch), whole_encoder_path):
        with tf.GradientTape() as tape:
            outputs = forward()
            loss = pretrainer.compute_loss(x=batch, y_pred=outputs)
        gradients.append((outputs, loss, tape.gradient(loss, pretrainer.trainable_variables)))
    (ours, our_loss, our_grads), (whole, whole_loss, whole_grads) = gradients
    for name in ours:
        np.testing.assert_allclose(ours[name], whole[name], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(our_loss, whole_loss, rtol=1e-6)
    assert_same_gradients(pretrainer.trainable_variables, our_grads, whole_grads)


@pytest.mark.parametrize("objective", ["nsp", "none"])
def test_training_step_loss_and_gradients_equal_those_through_the_logits(records, objective):
    # `update_loss` skips the logits (the fused output layer and loss); its loss,
    # metrics and gradients must equal compute_loss over the model's outputs.
    pretrainer = BertPretrainer(BertEncoder(TINY), objective=objective)
    batch = batch_of(records)
    total = tf.reduce_sum(tf.cast(batch["masked_lm_weights"], tf.float32))
    with tf.GradientTape() as tape:
        fused_loss, _ = pretrainer.update_loss(batch, normaliser=total)
    fused_grads = tape.gradient(fused_loss, pretrainer.trainable_variables)
    fused_metrics = {m.name: float(m.result()) for m in pretrainer.metrics}
    for metric in pretrainer.metrics:
        metric.reset_state()
    with tf.GradientTape() as tape:
        loss = pretrainer.compute_loss(x=batch, y_pred=pretrainer(batch, training=True))
    grads = tape.gradient(loss, pretrainer.trainable_variables)
    np.testing.assert_allclose(float(fused_loss), float(loss), rtol=1e-6)
    assert fused_metrics == pytest.approx(
        {m.name: float(m.result()) for m in pretrainer.metrics}, rel=1e-6
    )
    assert_same_gradients(pretrainer.trainable_variables, fused_grads, grads)


@pytest.mark.parametrize("objective", ["nsp", "none"])
def test_fast_kernels_train_as_the_plain_ops(records, objective):
    """One training step's loss, metrics and gradients with the fast kernels
    (fused masked-LM output and loss, 16-bit dropout, compiled GELU, fused QKV,
    hand-written gradients) and with the plain Keras / TensorFlow ops."""
    config = dataclasses.replace(TINY, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    batch = batch_of(records)
    total = tf.reduce_sum(tf.cast(batch["masked_lm_weights"], tf.float32))
    results = []
    for fast in (True, False):
        keras.utils.set_random_seed(5)
        pretrainer = BertPretrainer(BertEncoder(config, fast_kernels=fast), objective=objective)
        with tf.GradientTape() as tape:
            loss, _ = pretrainer.update_loss(batch, normaliser=total)
        grads = tape.gradient(loss, pretrainer.trainable_variables)
        metrics = {m.name: float(m.result()) for m in pretrainer.metrics}
        results.append((float(loss), metrics, grads, pretrainer.trainable_variables))
    (fast_loss, fast_metrics, fast_grads, variables), (loss, metrics, grads, _) = results
    np.testing.assert_allclose(fast_loss, loss, rtol=1e-5)
    assert fast_metrics == pytest.approx(metrics, rel=1e-5)
    assert_same_gradients(variables, fast_grads, grads, atol=1e-6)  # None: pooler without NSP


def _reference_loss(batch, outputs):
    """run_pretraining.py's formulas in NumPy."""

    def log_softmax(x):
        x = x - x.max(-1, keepdims=True)
        return x - np.log(np.exp(x).sum(-1, keepdims=True))

    log_probs = log_softmax(np.asarray(outputs["masked_lm_logits"], np.float64))
    ids = batch["masked_lm_ids"].numpy()
    weights = batch["masked_lm_weights"].numpy()
    per_example = -np.take_along_axis(log_probs, ids[..., None], -1)[..., 0]
    mlm = (per_example * weights).sum() / (weights.sum() + 1e-5)
    nsp_log_probs = log_softmax(np.asarray(outputs["next_sentence_logits"], np.float64))
    labels = batch["next_sentence_labels"].numpy()[:, 0]
    nsp = -nsp_log_probs[np.arange(len(labels)), labels].mean()
    return mlm, nsp


def test_loss_is_the_original_weighted_average(records):
    pretrainer = BertPretrainer(BertEncoder(TINY))
    batch = batch_of(records)
    outputs = pretrainer(batch)
    mlm, nsp = _reference_loss(batch, outputs)
    loss = pretrainer.compute_loss(x=batch, y_pred=outputs)
    np.testing.assert_allclose(float(loss), mlm + nsp, rtol=1e-5)
    np.testing.assert_allclose(float(pretrainer.masked_lm_loss_tracker.result()), mlm, rtol=1e-5)
    np.testing.assert_allclose(
        float(pretrainer.next_sentence_loss_tracker.result()), nsp, rtol=1e-5
    )
    # Padded predictions (weight 0) weigh nothing, whatever their ids.
    assert (batch["masked_lm_weights"].numpy() == 0).any()
    changed = dict(batch)
    changed["masked_lm_ids"] = tf.where(batch["masked_lm_weights"] > 0, batch["masked_lm_ids"], 7)
    np.testing.assert_allclose(
        float(pretrainer.compute_loss(x=changed, y_pred=outputs)), float(loss), rtol=1e-6
    )


def test_objectives():
    none = BertPretrainer(BertEncoder(TINY), objective="none")
    sop = BertPretrainer(BertEncoder(TINY), objective="sop")
    assert set(none.output) == {"masked_lm_logits"}
    assert set(sop.output) == {"masked_lm_logits", "next_sentence_logits"}
    with pytest.raises(ValueError, match="objective must be one of"):
        BertPretrainer(BertEncoder(TINY), objective="mlm")


def test_fit_on_dataset_dicts_without_loss(records):
    pretrainer = BertPretrainer(BertEncoder(TINY))
    pretrainer.compile(optimizer=keras.optimizers.Adam(1e-2), jit_compile=False)
    one_batch = inputs.pretraining_dataset(records, 16, 4, 8, is_training=False).take(1).repeat()
    history = pretrainer.fit(one_batch, steps_per_epoch=30, epochs=1, verbose=0, shuffle=False)
    assert set(history.history) == {
        "loss",
        "masked_lm_loss",
        "masked_lm_accuracy",
        "next_sentence_loss",
        "next_sentence_accuracy",
    }
    after = pretrainer.evaluate(one_batch, steps=1, return_dict=True, verbose=0)
    # Memorising one batch: far below the uniform-guess loss ln(32) + ln(2).
    assert after["loss"] < 0.5 * (np.log(32) + np.log(2))
    assert after["masked_lm_accuracy"] > 0.5


def test_head_weights_from_tf1_layout(records):
    pretrainer = BertPretrainer(BertEncoder(TINY))
    rng = np.random.default_rng(1)
    tensors = {
        "cls/predictions/transform/dense/kernel": rng.normal(size=(16, 16)),
        "cls/predictions/transform/dense/bias": rng.normal(size=(16,)),
        "cls/predictions/transform/LayerNorm/gamma": rng.normal(size=(16,)),
        "cls/predictions/transform/LayerNorm/beta": rng.normal(size=(16,)),
        "cls/predictions/output_bias": rng.normal(size=(32,)),
        "cls/seq_relationship/output_weights": rng.normal(size=(2, 16)),
        "cls/seq_relationship/output_bias": rng.normal(size=(2,)),
    }
    loaded = checkpoints.assign_head_weights(pretrainer, tensors)
    assert sorted(loaded) == sorted(tensors)
    np.testing.assert_allclose(
        pretrainer.next_sentence_head.dense.kernel.numpy(),
        tensors["cls/seq_relationship/output_weights"].T,
        rtol=1e-6,
    )
    np.testing.assert_allclose(
        pretrainer.masked_lm_head.output_bias.numpy(),
        tensors["cls/predictions/output_bias"],
        rtol=1e-6,
    )
    bad = dict(tensors, **{"cls/predictions/output_bias": np.zeros(31)})
    with pytest.raises(ValueError, match="cls/predictions/output_bias has shape"):
        checkpoints.assign_head_weights(pretrainer, bad, source="ckpt")


def test_from_real_checkpoint_keeps_encoder_and_adds_fresh_heads(minilm_path):
    pretrainer = BertPretrainer.from_pretrained(minilm_path, objective="none")
    reference = BertEncoder.from_pretrained(minilm_path)
    np.testing.assert_array_equal(
        pretrainer.encoder.token_embedding.embeddings.numpy(),
        reference.token_embedding.embeddings.numpy(),
    )
    assert pretrainer.masked_lm_head.output_bias.shape == (reference.config.vocab_size,)


def test_config_round_trip_and_mixed_precision(records):
    pretrainer = BertPretrainer(BertEncoder(TINY, dtype="mixed_bfloat16"), objective="sop")
    # The heads compute as the encoder does: the masked-LM head's products in bfloat16.
    assert pretrainer.encoder.dtype_policy.name == "mixed_bfloat16"
    assert layer_policies(pretrainer) == {"mixed_bfloat16"}
    clone = BertPretrainer.from_config(pretrainer.get_config())
    assert clone.objective == "sop" and clone.encoder.config == TINY
    outputs = pretrainer(batch_of(records))
    assert outputs["masked_lm_logits"].dtype == tf.float32
