"""Builds the tf.distribute strategy a training run asks for.

`tpu`: TPUStrategy through TPUClusterResolver (a TPU name, `grpc://` address
or `local`). `mirrored`: MirroredStrategy over this machine's GPUs (or the
devices named). `multi_worker`: MultiWorkerMirroredStrategy, the cluster read
from `TF_CONFIG`. `one_device`: no distribution (the default strategy).
`auto`: `multi_worker` when TF_CONFIG names more than one task, `mirrored`
with several GPUs, else `one_device`. Pretraining and fine-tuning share these
names and the runtime choices below (precision, XLA).
"""

from __future__ import annotations

import json
import os
from typing import Sequence

import tensorflow as tf

from keras_bert.kernels import precision

STRATEGIES = ("auto", "one_device", "mirrored", "multi_worker", "tpu")
TRAIN_LOOPS = ("auto", "fit", "custom")  # custom: strategy.run chunks (multi-worker's)


def tf_config_task_count() -> int:
    """Number of tasks in the TF_CONFIG cluster (0 when unset)."""
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        return 0
    try:
        cluster = json.loads(raw).get("cluster", {})
    except json.JSONDecodeError as e:
        raise ValueError(f"TF_CONFIG is not valid JSON ({e})") from None
    return sum(len(tasks) for tasks in cluster.values())


def build_strategy(
    kind: str = "auto", tpu: str | None = None, devices: Sequence[str] | None = None
) -> tf.distribute.Strategy:
    """A `tf.distribute.Strategy` of the given kind (see the module docstring)."""
    if kind not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {kind!r}")
    if kind == "auto":
        if tf_config_task_count() > 1:
            kind = "multi_worker"
        elif len(tf.config.list_logical_devices("GPU")) > 1:
            kind = "mirrored"
        else:
            kind = "one_device"
    if kind == "one_device":
        return tf.distribute.get_strategy()
    if kind == "mirrored":
        return tf.distribute.MirroredStrategy(devices=devices)
    if kind == "multi_worker":
        if tf_config_task_count() == 0:
            raise ValueError(
                "strategy multi_worker needs TF_CONFIG describing the cluster "
                "(see https://www.tensorflow.org/guide/distributed_training)"
            )
        return tf.distribute.MultiWorkerMirroredStrategy()
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu or "")
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def is_multi_worker(strategy: tf.distribute.Strategy) -> bool:
    """True for a strategy spanning several worker processes."""
    # Private, read directly (tests/test_keras_internals.py): a silent default
    # would make every worker of a multi-worker run write checkpoints as the chief.
    return bool(strategy.extended._in_multi_worker_mode())


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """The task that writes checkpoints and summaries (every process when not multi-worker)."""
    if not is_multi_worker(strategy):
        return True
    resolver = strategy.cluster_resolver
    task_type, task_id = resolver.task_type, resolver.task_id
    return task_type == "chief" or (
        task_type == "worker" and task_id == 0 and "chief" not in resolver.cluster_spec().as_dict()
    )


def resolve_jit_compile(jit_compile: bool | str) -> bool:
    """`auto` -> XLA where there is an accelerator (GPU, TPU), not on a CPU-only
    host, where the pretraining step measured slower with XLA than with
    TensorFlow's own kernels. (Keras' own "auto" also turns XLA off under any
    tf.distribute strategy, GPUs included, hence this one.)"""
    if jit_compile != "auto":
        return bool(jit_compile)
    return any(device.device_type != "CPU" for device in tf.config.list_physical_devices())


def model_dtype(mixed_precision: str | None, field: str = "mixed_precision") -> str | None:
    """The dtype policy models are built with (keras_bert.kernels.precision's
    one rule): None for float32, else `mixed_bfloat16` (TPU, CPU) or
    `mixed_float16` (GPU; the update step adds loss scaling)."""
    return precision.model_dtype(mixed_precision, field)


def check_runtime_fields(config: object) -> None:
    """Validates the runtime fields PretrainConfig and FinetuneConfig share:
    strategy, train_loop, jit_compile, mixed_precision (errors name the field)."""
    if config.strategy not in STRATEGIES:
        raise ValueError(
            f"config field strategy must be one of {STRATEGIES}, got {config.strategy!r}"
        )
    if config.train_loop not in TRAIN_LOOPS:
        raise ValueError(
            f"config field train_loop must be one of {TRAIN_LOOPS}, got {config.train_loop!r}"
        )
    if config.jit_compile not in (True, False, "auto"):
        raise ValueError(
            f"config field jit_compile must be true, false or auto, got {config.jit_compile!r}"
        )
    model_dtype(config.mixed_precision, "config field mixed_precision")
