"""How TensorFlow starts in the command-line tools: the data commands import it
without its optional extras (`import_tensorflow_lean`); the training commands
turn on its fastest CPU settings (`use_fast_cpu_training_settings`).

`import tensorflow` imports Keras (to register Keras' optimizers for
SavedModels), and tensorflow-text subclasses `tf.keras.layers.Layer` when it
is imported, so even the tokenizer alone loads Keras. Keras and TensorFlow's
legacy Keras code then import scikit-learn, matplotlib, pandas, SciPy and
OpenCV, and TensorFlow's GCE cluster resolver imports googleapiclient,
whenever they are installed (tf-models-official and tensorflow-datasets
install them): about half of the import time, none of it used to tokenize
text or write TFRecords. Every one of those imports is optional in its
importer (`try: import sklearn / except ImportError: sklearn = None`), so a
process that only makes data can hide them while TensorFlow loads.

Keras itself goes the same way: TensorFlow's own import of it is
optional too, and tensorflow-text's Keras layers (`tensorflow_text.keras`,
which a tokenizer does not use) are replaced by an empty module while it loads.

The importers keep `None` for the rest of the process (Keras' scikit-learn
wrapper, for one, then reports scikit-learn missing; `tensorflow_text.keras`
is absent), hence this is for commands such as `keras-bert
create-pretraining-data`, never for the library.
"""

import gc
import os
import sys
import types

OPTIONAL_PACKAGES = ("sklearn", "matplotlib", "pandas", "scipy", "cv2", "googleapiclient")
TEXT_KERAS = "tensorflow_text.python.keras"


def import_tensorflow_lean():
    """Imports tensorflow and tensorflow_text without `OPTIONAL_PACKAGES` nor Keras.

    Nothing happens when TensorFlow is already imported. The packages are
    hidden only during the import: importing one afterwards works as usual.
    """
    if "tensorflow" in sys.modules:
        return
    hidden = [name for name in OPTIONAL_PACKAGES + ("keras",) if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # `import name` now raises ImportError
    sys.modules[TEXT_KERAS] = types.ModuleType(
        TEXT_KERAS, "tensorflow-text's Keras layers, not loaded (keras_bert.cli.startup)"
    )
    # The import creates about a million objects that live as long as the
    # process; the garbage collector would scan them again and again during
    # the import and the tokenizer's tracing. Freezing moves them out of its
    # reach.
    collecting = gc.isenabled()
    gc.disable()
    try:
        import tensorflow  # noqa: F401
        import tensorflow_text  # noqa: F401
    finally:
        for name in hidden:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]
        stub = sys.modules.pop(TEXT_KERAS)
        for package in ("tensorflow_text", "tensorflow_text.python"):
            if getattr(sys.modules.get(package), "keras", None) is stub:
                delattr(sys.modules[package], "keras")
        gc.freeze()
        if collecting:
            gc.enable()


# TensorFlow's fastest CPU settings for training, read once when TensorFlow
# loads. oneDNN kernels: TensorFlow turns them on by default only on CPUs with
# AVX512-VNNI, AVX512-BF16 or AMX, yet they are faster on AVX2 CPUs too. The
# pooling (BFC) host allocator: without it every activation buffer above 32 MB
# is a fresh mmap whose pages fault in one by one (glibc's largest mmap
# threshold). Figures in benchmarks/README.md; the benchmarks run with both.
FAST_CPU_TRAINING = {"TF_ENABLE_ONEDNN_OPTS": "1", "TF_CPU_ALLOCATOR_USE_BFC": "true"}


def use_fast_cpu_training_settings(environ=None):
    """Sets `FAST_CPU_TRAINING` in the environment where the user has not set
    them, if TensorFlow is not imported yet (it reads them at its import).
    For the training commands; returns the names it set."""
    environ = os.environ if environ is None else environ
    if "tensorflow" in sys.modules:
        return []
    chosen = [name for name in FAST_CPU_TRAINING if name not in environ]
    for name in chosen:
        environ[name] = FAST_CPU_TRAINING[name]
    return chosen
