"""The one switch between the fast kernels and the plain TensorFlow / Keras ops.

On by default: every fast kernel gives the plain ops' values (tests/kernels/test_fast_*.py
prove it, values and gradients) in less time on the CPUs and accelerators measured
(recipes/benchmarks/README.md). Off, the layers run the plain path a reader
would write from the paper: Keras' Dense, LayerNormalization and Dropout, Keras'
exact GELU, separate query / key / value products, TensorFlow's softmax
cross-entropy over the logits. The switch is read when a layer's graph is traced:
set it before building and calling a model.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

_fast = True


def fast_kernels_enabled() -> bool:
    return _fast


def use_fast_kernels(enabled: bool) -> None:
    """Fast kernels on (the default) or off (the plain reference path)."""
    global _fast
    _fast = bool(enabled)


@contextlib.contextmanager
def plain_kernels() -> Iterator[None]:
    """`with plain_kernels(): ...` runs the plain path, then restores the switch."""
    before = _fast
    use_fast_kernels(False)
    try:
        yield
    finally:
        use_fast_kernels(before)
