"""Optimisers of the paper: AdamW without decay on LayerNorm and biases, with
linear warmup then linear decay to zero; LAMB for large batches; global-norm
clipping for both (gradient accumulation: `BertPretrainer.compile`)."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf
from keras import ops

from keras_bert.config_fields import ConfigFields


@keras.saving.register_keras_serializable(package="keras_bert")
class WarmupLinearDecay(ConfigFields, keras.optimizers.schedules.LearningRateSchedule):
    """0 -> peak over `warmup_steps`, then linearly to 0 at `total_steps`.

    `batches_per_step`: with Keras' own gradient accumulation (the optimizer's
    `gradient_accumulation_steps`) Keras calls the schedule with the count of
    batches, not of updates; steps here are updates.
    """

    config_fields = ("peak_learning_rate", "total_steps", "warmup_steps", "batches_per_step")

    def __init__(
        self,
        peak_learning_rate: float,
        total_steps: int,
        warmup_steps: int,
        batches_per_step: int = 1,
    ) -> None:
        self.peak_learning_rate = peak_learning_rate
        self.total_steps = total_steps
        self.warmup_steps = warmup_steps
        self.batches_per_step = batches_per_step

    def __call__(self, step):
        step = keras.ops.floor_divide(step, self.batches_per_step)
        step = keras.ops.cast(step, "float32")
        warmup = step / max(self.warmup_steps, 1)
        decay = (self.total_steps - step) / max(self.total_steps - self.warmup_steps, 1)
        fraction = keras.ops.where(step < self.warmup_steps, warmup, decay)
        return self.peak_learning_rate * keras.ops.clip(fraction, 0.0, 1.0)


def _squared_norm(gradient):
    """Squared L2 norm of a dense gradient or of `_deduplicated` IndexedSlices
    (half precision summed in float32).

    An embedding's gradient is IndexedSlices whose rows repeat (one per
    lookup, plus every row of a tied output layer's dense part, plus one set
    per replica after an all-reduce). Its norm is that of the summed rows;
    Keras and tf.clip_by_global_norm square the slices one by one instead,
    which is another number on one device and on several. `l2_loss` is one
    pass that writes nothing: squaring, then summing, wrote a (V, H)
    temporary for the embedding every step.
    """
    if isinstance(gradient, tf.IndexedSlices):
        gradient = gradient.values  # each row once
    if gradient.dtype in (tf.float16, tf.bfloat16):
        gradient = tf.cast(gradient, tf.float32)
    return 2.0 * tf.nn.l2_loss(gradient)


def global_norm(gradients) -> tf.Tensor:
    """The L2 norm of all `gradients` together (None skipped), an
    IndexedSlices' repeated rows summed first (`_squared_norm`)."""
    return _norm_of_deduplicated([_deduplicated(g) for g in gradients if g is not None])


def _norm_of_deduplicated(gradients) -> tf.Tensor:
    return tf.sqrt(tf.add_n([_squared_norm(g) for g in gradients]))


class GlobalBatchClipping:
    """Global-norm clipping by the true norm of the global batch's gradient.

    Keras clips each replica's gradient before it all-reduces them, so with
    several replicas the clipped sum is not the clipped global gradient (and
    training diverges from one device fed the same batch). Here the norm is
    taken of the all-reduced gradient and every replica scales its share by
    the same factor: the sum Keras then forms is the clipped global gradient.
    Repeated IndexedSlices rows are summed before squaring (`_squared_norm`),
    so one device and any number of replicas clip by the same factor.
    """

    def _clip_gradients(self, grads):
        if not self.global_clipnorm:
            return super()._clip_gradients(grads)
        context = tf.distribute.get_replica_context()
        replicated = context is not None and context.num_replicas_in_sync > 1
        present = [g for g in grads if g is not None]
        # An embedding's rows once (`_deduplicated`): its (V, H) table is made
        # dense once, after the norm and the scaling (each was a pass over it).
        local = [_deduplicated(g) for g in present]
        if replicated:
            # All-reduced as they came: the same shapes on every worker.
            norm = global_norm(context.all_reduce(tf.distribute.ReduceOp.SUM, present))
        else:
            norm = _norm_of_deduplicated(local)
        clip = tf.cast(self.global_clipnorm, norm.dtype)
        # Scaled only above the threshold: below it the scale is 1, and the
        # multiply a pass over every gradient that changes no bit (fine-tuning,
        # the norm falls under the threshold early, and that pass is then a
        # large share of the clipping's time).
        scaled = iter(
            tf.cond(
                norm > clip,
                lambda: [_dense(_scaled(g, clip / norm)) for g in local],
                lambda: [_dense(g) for g in local],
            )
        )
        return [None if g is None else next(scaled) for g in grads]


def _deduplicated(gradient):
    """An IndexedSlices gradient with each row once, its lookups summed (the
    order of tf.convert_to_tensor's sum, so densified the same bits), where
    shapes may vary; a dense gradient, or under XLA / TPUs, as it is dense.

    An embedding's gradient has a row per lookup; made dense first, the
    norm and the scaling were each a pass over the whole (V, H) table.
    """
    if not isinstance(gradient, tf.IndexedSlices) or _compiled_by_xla():
        return tf.convert_to_tensor(gradient)
    unique, position = tf.unique(gradient.indices)
    rows = tf.math.unsorted_segment_sum(gradient.values, position, tf.shape(unique)[0])
    return tf.IndexedSlices(rows, unique, gradient.dense_shape)


def _compiled_by_xla() -> bool:
    """Whether this graph is compiled by XLA (jit_compile, TPUs), where a
    tensor's shape may not depend on its values (tf.unique's does)."""
    return tf.__internal__.get_enclosing_xla_context() is not None


def _scaled(gradient, scale):
    if isinstance(gradient, tf.IndexedSlices):
        values = gradient.values * tf.cast(scale, gradient.values.dtype)
        return tf.IndexedSlices(values, gradient.indices, gradient.dense_shape)
    return gradient * tf.cast(scale, gradient.dtype)


def _dense(gradient):
    """Dense results, as Keras's own clipping gives (LAMB's update needs them);
    a fresh tensor in each branch of the clipping's tf.cond."""
    if isinstance(gradient, tf.IndexedSlices):
        return tf.convert_to_tensor(gradient)
    return tf.identity(gradient)


def _require_keras_hooks(base: type, hooks: dict[str, str]) -> None:
    """Raises naming the Keras version when `base` lacks a private method this
    module overrides: Keras would no longer call the override, and what it
    does would silently stop happening (tests/test_keras_internals.py checks
    that Keras still calls them)."""
    missing = [name for name in hooks if not callable(getattr(base, name, None))]
    if missing:
        raise ImportError(
            f"keras_bert.training.optimization overrides {base.__name__}."
            + f", {base.__name__}.".join(missing)
            + f", which Keras {keras.__version__} lacks: "
            + "; ".join(hooks[name] for name in missing)
            + ". keras_bert is tested with Keras 3.15 (tests/test_keras_internals.py)"
        )


_require_keras_hooks(
    keras.optimizers.Optimizer,
    {
        "_clip_gradients": "global-norm clipping would fall back to Keras' per-replica clipping",
        "_apply_weight_decay": "AdamW's one-pass decay and LAMB's decay inside its trust ratio "
        "would be bypassed",
    },
)


@keras.saving.register_keras_serializable(package="keras_bert")
class AdamW(GlobalBatchClipping, keras.optimizers.AdamW):
    """keras.optimizers.AdamW with `GlobalBatchClipping`, a fused update, and
    epsilon where Adam's Algorithm 1 (and PyTorch, HuggingFace) put it.

    The update is w <- w - lr * m_hat / (sqrt(v_hat) + epsilon), m_hat and
    v_hat the bias-corrected moments (Kingma & Ba, Algorithm 1; torch.optim.AdamW).
    Keras (and TensorFlow's Adam) add epsilon to sqrt(v) instead, the paper's
    "epsilon hat" variant: in bias-corrected terms an epsilon of
    epsilon / sqrt(1 - beta2^t), 32x larger at step 1 and still 3x at step 100.
    With the gradient clipped to norm 1 over 22M weights most entries are far
    below it, so early updates shrank: fine-tuning MiniLM, the encoder's first
    updates came out 35-60 % off the HuggingFace Trainer's from the same
    weights and batches (benchmarks/finetuning_parity.py).

    Keras's Adam update is about a dozen separate element-wise ops per
    variable, each a pass over the variable or its moments, which the (V, H)
    embedding table makes a visible share of a CPU step (figures in
    benchmarks/README.md). TensorFlow's `ResourceApplyAdam` kernel
    does the same arithmetic in one pass (given epsilon * sqrt(1 - beta2^t),
    the kernel's epsilon-hat form is Algorithm 1's). The decoupled weight decay
    is Keras's (and PyTorch's), applied before the update, as one multiply.
    """

    def _apply_weight_decay(self, variables):
        """w <- w * (1 - lr * wd), Keras's w <- w - w * wd * lr in one pass over
        w: Keras forms w * wd * lr as two full-size products, then subtracts,
        and evaluates the schedule once per variable."""
        if self.weight_decay is None:
            return
        rate = tf.cast(self.learning_rate, tf.float32) * tf.cast(self.weight_decay, tf.float32)

        def decay(variable):
            if self._use_weight_decay(variable):
                variable.assign(variable * tf.cast(1.0 - rate, variable.dtype))

        def decay_each(distribution, variables):
            for variable in variables:
                distribution.extended.update(
                    variable.value if isinstance(variable, keras.Variable) else variable,
                    decay,
                    group=False,
                )

        # As Keras's TensorFlow optimizer: inside a tf.distribute update, each
        # replica decays its own copy.
        tf.__internal__.distribute.interim.maybe_merge_call(
            decay_each, self._distribution_strategy, variables
        )

    def update_step(
        self, gradient: tf.Tensor, variable: keras.Variable, learning_rate: tf.Tensor | float
    ) -> None:
        if self.amsgrad:
            return super().update_step(gradient, variable, learning_rate)
        dtype = variable.dtype
        index = self._get_variable_index(variable)
        m, v = self._momentums[index], self._velocities[index]
        step = ops.cast(self.iterations + 1, dtype)
        gradient = tf.convert_to_tensor(gradient)  # IndexedSlices: the kernel is dense
        beta2_power = ops.power(ops.cast(self.beta_2, dtype), step)
        # The kernel adds epsilon to sqrt(v) = sqrt(v_hat) * sqrt(1 - beta2^t):
        # scaled so, it is epsilon added to sqrt(v_hat) (Algorithm 1, see above).
        epsilon = ops.cast(self.epsilon, dtype) * ops.sqrt(1.0 - beta2_power)
        tf.raw_ops.ResourceApplyAdam(
            var=_handle(variable),
            m=_handle(m),
            v=_handle(v),
            beta1_power=ops.power(ops.cast(self.beta_1, dtype), step),
            beta2_power=beta2_power,
            lr=ops.cast(learning_rate, dtype),
            beta1=ops.cast(self.beta_1, dtype),
            beta2=ops.cast(self.beta_2, dtype),
            epsilon=epsilon,
            grad=ops.cast(gradient, dtype),
        )


def _handle(variable):
    """The resource handle of a Keras or tf variable (inside a tf.distribute
    update, the replica's own component)."""
    return (variable.value if isinstance(variable, keras.Variable) else variable).handle


# Variable-name fragments that get no weight decay (as the original optimizer).
NO_DECAY = ("layer_norm", "LayerNorm", "bias", "gamma", "beta")


def create_adamw(
    learning_rate: float,
    total_steps: int,
    warmup_steps: int,
    weight_decay: float = 0.01,
    clipnorm: float | None = 1.0,
    **kwargs: Any,
) -> AdamW:
    """AdamW of the paper: beta1 0.9, beta2 0.999, epsilon 1e-6, weight decay 0.01,
    the gradient clipped to global norm 1.0 (`clipnorm=None`: not clipped).

    The clipping is the original's (google-research/bert `optimization.py`,
    fine-tuning included) and HuggingFace Trainer's default: fine-tuning MiniLM
    on wnut16 without it gave dev entity F1 23.1 against 36.2 with it, the same
    seed and data order (benchmarks/finetuning.py).
    """
    batches_per_step = kwargs.get("gradient_accumulation_steps") or 1
    optimizer = AdamW(
        learning_rate=WarmupLinearDecay(learning_rate, total_steps, warmup_steps, batches_per_step),
        weight_decay=weight_decay,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        global_clipnorm=clipnorm,
        **kwargs,
    )
    optimizer.exclude_from_weight_decay(var_names=list(NO_DECAY))
    return optimizer


@keras.saving.register_keras_serializable(package="keras_bert")
class Lamb(GlobalBatchClipping, keras.optimizers.Optimizer):
    """LAMB (You et al., 2019) as used for BERT with large batches.

    Unlike `keras.optimizers.Lamb`, the weight decay is part of the update
    whose norm sets the trust ratio (as in the paper and Model Garden), and
    LayerNorm / bias variables get neither weight decay nor layer adaptation.
    """

    def __init__(
        self,
        learning_rate: float | keras.optimizers.schedules.LearningRateSchedule = 0.001,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-6,
        weight_decay_rate: float = 0.01,
        name: str = "lamb",
        **kwargs: Any,
    ) -> None:
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.weight_decay_rate = weight_decay_rate
        self.exclude_from_weight_decay(var_names=list(NO_DECAY))

    def build(self, var_list: list[keras.Variable]) -> None:
        if self.built:
            return
        super().build(var_list)
        self._momentums, self._velocities = self.add_optimizer_variables(
            var_list, ["momentum", "velocity"]
        )

    def update_step(
        self, gradient: tf.Tensor, variable: keras.Variable, learning_rate: tf.Tensor | float
    ) -> None:
        lr = ops.cast(learning_rate, variable.dtype)
        # An embedding's gradient arrives as IndexedSlices when not clipped;
        # the moments below are dense anyway.
        gradient = ops.cast(tf.convert_to_tensor(gradient), variable.dtype)
        step = ops.cast(self.iterations + 1, variable.dtype)
        m = self._momentums[self._get_variable_index(variable)]
        v = self._velocities[self._get_variable_index(variable)]
        self.assign(m, m * self.beta_1 + gradient * (1.0 - self.beta_1))
        self.assign(v, v * self.beta_2 + ops.square(gradient) * (1.0 - self.beta_2))
        m_hat = m / (1.0 - ops.power(ops.cast(self.beta_1, variable.dtype), step))
        v_hat = v / (1.0 - ops.power(ops.cast(self.beta_2, variable.dtype), step))
        update = m_hat / (ops.sqrt(v_hat) + self.epsilon)
        ratio = 1.0
        # One rule for both: LayerNorm and bias are excluded from decay and adaptation.
        if self._use_weight_decay(variable):
            update = update + self.weight_decay_rate * variable
            w_norm = ops.sqrt(ops.sum(ops.square(variable)))
            u_norm = ops.sqrt(ops.sum(ops.square(update)))
            ratio = ops.where(w_norm > 0, ops.where(u_norm > 0, w_norm / u_norm, 1.0), 1.0)
        self.assign_sub(variable, ratio * lr * update)

    def _apply_weight_decay(self, variables):
        pass  # Weight decay is part of update_step (it enters the trust ratio).

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            {
                "beta_1": self.beta_1,
                "beta_2": self.beta_2,
                "epsilon": self.epsilon,
                "weight_decay_rate": self.weight_decay_rate,
            }
        )
        return config


OPTIMIZERS = ("adamw", "lamb")


def create_optimizer(
    name: str = "adamw",
    learning_rate: float = 1e-4,
    total_steps: int = 1_000_000,
    warmup_steps: int = 10_000,
    weight_decay: float = 0.01,
    clipnorm: float | None = 1.0,
) -> AdamW | Lamb:
    """The pretraining optimizer: AdamW (the paper) or LAMB (large batches), with
    linear warmup then linear decay to zero, and global-norm clipping.

    Gradient accumulation is the models' own (`model.compile(...,
    gradient_accumulation_steps=k)`, `keras_bert.models.update_step`), which
    works under every tf.distribute strategy; Keras' own (the optimizer's `gradient_accumulation_steps`) works
    on one replica only.
    """
    if name == "adamw":
        return create_adamw(
            learning_rate, total_steps, warmup_steps, weight_decay=weight_decay, clipnorm=clipnorm
        )
    if name == "lamb":
        return Lamb(
            WarmupLinearDecay(learning_rate, total_steps, warmup_steps),
            weight_decay_rate=weight_decay,
            global_clipnorm=clipnorm,
        )
    raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {name!r}")
