"""Optimisers of the paper: AdamW without decay on LayerNorm and biases, with
linear warmup then linear decay to zero."""

import keras


@keras.saving.register_keras_serializable(package="keras_bert")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """0 -> peak over `warmup_steps`, then linearly to 0 at `total_steps`."""

    def __init__(self, peak_learning_rate, total_steps, warmup_steps):
        self.peak_learning_rate = peak_learning_rate
        self.total_steps = total_steps
        self.warmup_steps = warmup_steps

    def __call__(self, step):
        step = keras.ops.cast(step, "float32")
        warmup = step / max(self.warmup_steps, 1)
        decay = (self.total_steps - step) / max(self.total_steps - self.warmup_steps, 1)
        fraction = keras.ops.where(step < self.warmup_steps, warmup, decay)
        return self.peak_learning_rate * keras.ops.clip(fraction, 0.0, 1.0)

    def get_config(self):
        return {"peak_learning_rate": self.peak_learning_rate,
                "total_steps": self.total_steps, "warmup_steps": self.warmup_steps}


# Variable-name fragments that get no weight decay (as the original optimizer).
NO_DECAY = ("layer_norm", "LayerNorm", "bias", "gamma", "beta")


def create_adamw(learning_rate, total_steps, warmup_steps, weight_decay=0.01,
                 clipnorm=None, **kwargs):
    """AdamW of the paper: beta1 0.9, beta2 0.999, epsilon 1e-6, weight decay 0.01."""
    optimizer = keras.optimizers.AdamW(
        learning_rate=WarmupLinearDecay(learning_rate, total_steps, warmup_steps),
        weight_decay=weight_decay, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
        global_clipnorm=clipnorm, **kwargs)
    optimizer.exclude_from_weight_decay(var_names=list(NO_DECAY))
    return optimizer
