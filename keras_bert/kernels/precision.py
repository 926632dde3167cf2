"""Precision: one rule for the Python API, every command and every run.

The default is float32 everywhere (`from_pretrained`, `keras-bert finetune`,
`pretrain`, the quickstart): the Keras and HuggingFace convention, and the only
choice whose results do not change from one machine to the next. A reduced
precision is asked for by name (`mixed_bfloat16`, `mixed_float16`), or as
`auto`: the precision this machine multiplies fastest.

A reduced precision pays only where the hardware computes it natively:

- bfloat16 on TPUs, on NVIDIA GPUs from Ampere on (compute capability 8.0) and
  on CPUs with AVX512_BF16 or AMX-BF16 (oneDNN's native bfloat16 kernels);
- float16 on older NVIDIA GPUs with tensor cores (7.0), with loss scaling.

Anywhere else TensorFlow widens bfloat16 to float32 to multiply it, so a mixed
policy only adds casts: "auto" then means float32. The choice is said in one
line on standard error (once per choice and process), because a precision
picked silently is a result that changes silently from one machine to the next.

`KERAS_BERT_CPU_FLAGS` (a comma- or space-separated list of /proc/cpuinfo flag
names, e.g. `avx2` or `avx2,avx512_bf16`) replaces the flags read from this
CPU, so a test or a user sees what `auto` would pick on another machine.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Iterable

import tensorflow as tf

AUTO = "auto"
MIXED_BFLOAT16 = "mixed_bfloat16"
MIXED_FLOAT16 = "mixed_float16"
FLOAT32 = "float32"
# What every entry point uses when none is named.
DEFAULT = FLOAT32
PRECISIONS = (AUTO, FLOAT32, MIXED_BFLOAT16, MIXED_FLOAT16)
# The short names the command line has always taken.
SHORT_NAMES = {"bfloat16": MIXED_BFLOAT16, "float16": MIXED_FLOAT16}
CPU_FLAGS_ENV = "KERAS_BERT_CPU_FLAGS"
# /proc/cpuinfo's names for native bfloat16 arithmetic on x86.
CPU_BFLOAT16_FLAGS = ("avx512_bf16", "amx_bf16")
# NVIDIA compute capabilities: bfloat16 tensor cores from 8.0, float16 from 7.0.
GPU_BFLOAT16_CAPABILITY = (8, 0)
GPU_FLOAT16_CAPABILITY = (7, 0)


def read_cpu_flags(cpuinfo_path: str = "/proc/cpuinfo") -> frozenset[str]:
    """The first processor's feature flags (empty where there is no cpuinfo,
    e.g. macOS or Windows: those then get float32 on the CPU)."""
    try:
        with open(cpuinfo_path, encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                name, _, value = line.partition(":")
                if name.strip() in ("flags", "Features"):
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def cpu_flags() -> frozenset[str]:
    """This CPU's flags, or $KERAS_BERT_CPU_FLAGS where it is set."""
    override = os.environ.get(CPU_FLAGS_ENV)
    if override is not None:
        return frozenset(override.replace(",", " ").lower().split())
    return read_cpu_flags()


def choose_precision(
    device_types: Iterable[str],
    gpu_capabilities: Iterable[tuple[int, int]],
    cpu_flags: Iterable[str],
) -> tuple[str, str]:
    """(policy, reason) for the devices a model will run on; pure, for tests."""
    device_types = set(device_types)
    capabilities = list(gpu_capabilities)
    if "TPU" in device_types:
        return MIXED_BFLOAT16, "TPU: native bfloat16"
    if capabilities:
        oldest = min(capabilities)
        if oldest >= GPU_BFLOAT16_CAPABILITY:
            return (
                MIXED_BFLOAT16,
                f"GPU compute capability {oldest[0]}.{oldest[1]}: native bfloat16",
            )
        if oldest >= GPU_FLOAT16_CAPABILITY:
            return MIXED_FLOAT16, (
                f"GPU compute capability {oldest[0]}.{oldest[1]}: float16 tensor cores, no bfloat16"
            )
        return FLOAT32, f"GPU compute capability {oldest[0]}.{oldest[1]}: no tensor cores"
    native = sorted(set(cpu_flags) & set(CPU_BFLOAT16_FLAGS))
    if native:
        return MIXED_BFLOAT16, f"CPU with {', '.join(native).upper()}: native bfloat16"
    return FLOAT32, (
        "CPU without AVX512_BF16 / AMX-BF16: bfloat16 would be widened to float32 for every product"
    )


def _gpu_capability(device: tf.config.PhysicalDevice) -> tuple[int, int]:
    capability = tf.config.experimental.get_device_details(device).get("compute_capability")
    return tuple(capability) if capability else (0, 0)


def native_precision() -> tuple[str, str]:
    """(policy, reason) for this process's devices (and $KERAS_BERT_CPU_FLAGS)."""
    return _native_precision(cpu_flags())


@functools.lru_cache(maxsize=None)
def _native_precision(flags: frozenset[str]) -> tuple[str, str]:
    devices = tf.config.list_physical_devices()
    return choose_precision(
        (device.device_type for device in devices),
        [_gpu_capability(device) for device in devices if device.device_type == "GPU"],
        flags,
    )


@functools.lru_cache(maxsize=None)
def _say_once(policy: str, reason: str) -> None:
    print(f"keras_bert: precision auto -> {policy} ({reason})", file=sys.stderr, flush=True)


def resolve(value: str | None, field: str = "mixed_precision") -> str:
    """The policy name a run or model uses: float32, mixed_bfloat16 or
    mixed_float16. None is the default (float32); `auto` is this machine's
    native precision, said once; `bfloat16` / `float16` name the mixed
    policies. Anything else is refused naming `field`."""
    if value is None:
        return DEFAULT
    value = SHORT_NAMES.get(value, value) if isinstance(value, str) else value
    if value not in PRECISIONS:
        raise ValueError(
            f"{field} must be one of auto, float32, mixed_bfloat16, mixed_float16 "
            f"(or bfloat16, float16), got {value!r}"
        )
    if value == AUTO:
        policy, reason = native_precision()
        _say_once(policy, reason)
        return policy
    return value


def model_dtype(value: str | None, field: str = "mixed_precision") -> str | None:
    """`resolve`'s policy as a Keras layer's `dtype`: None for float32 (Keras'
    default policy), else the mixed policy's name."""
    policy = resolve(value, field)
    return None if policy == FLOAT32 else policy


def resolve_auto(dtype):
    """A layer's `dtype` argument unchanged unless it is "auto": then this
    machine's native precision, said once, as `model_dtype`."""
    if not (isinstance(dtype, str) and dtype == AUTO):
        return dtype
    return model_dtype(dtype)
