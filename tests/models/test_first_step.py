"""fit's first step: the training step traced once, the same update as Keras' lazy build."""

import keras
import numpy as np
from task_models import assert_same_weights, classifier, reviews

from keras_bert.models.update_step import UpdateStep


def traced_steps(model):
    """Counts the Python calls of `model.train_step`: each one is a trace."""
    calls = []
    step = model.train_step

    def counted(data):
        calls.append(1)
        return step(data)

    model.train_step = counted
    return calls


def test_fit_traces_its_step_once(datasets_dir):
    texts, labels = reviews(datasets_dir, count=12)
    model = classifier()
    model.compile()
    calls = traced_steps(model)
    assert not model.optimizer.built
    # 12 rows in batches of 8: a full batch, then a partial one, two epochs.
    model.fit(texts, labels, batch_size=8, epochs=2, verbose=0)
    assert model.optimizer.built
    # Keras builds the optimizer lazily inside the first trace, which then
    # runs again without variable creation: two traces of the whole step.
    assert len(calls) == 1


def test_the_update_is_keras_own(datasets_dir, monkeypatch):
    """The optimizer built before the trace trains exactly as Keras' build inside it."""
    texts, labels = reviews(datasets_dir, count=12)
    trained = []
    for build_first in (True, False):
        if not build_first:
            monkeypatch.setattr(UpdateStep, "make_train_function", keras.Model.make_train_function)
        model = classifier()
        model.compile(optimizer=keras.optimizers.Adam(1e-3))
        keras.utils.set_random_seed(1)
        history = model.fit(texts, labels, batch_size=8, epochs=2, verbose=0)
        trained.append((model, history.history["loss"]))
    (first, first_loss), (lazy, lazy_loss) = trained
    np.testing.assert_allclose(first_loss, lazy_loss, rtol=1e-6)
    assert_same_weights(first, lazy)
    assert len(first.optimizer.variables) == len(lazy.optimizer.variables)
