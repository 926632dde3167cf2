"""Submodules of a package, imported on first attribute access.

`keras_bert.training.finetuning` then works after a plain `import keras_bert`,
while a command that needs only the tokenizer never imports Keras.
"""

import importlib
import pkgutil


def submodule_names(package_path):
    """The public submodules and subpackages on disk (found without importing them)."""
    return sorted(
        info.name for info in pkgutil.iter_modules(package_path) if not info.name.startswith("_")
    )


def submodule_getattr(package_name, package_path):
    """A module-level `__getattr__` for `package_name` that imports its submodules."""
    names = set(submodule_names(package_path))

    def __getattr__(name):
        if name in names:
            return importlib.import_module(f"{package_name}.{name}")
        raise AttributeError(f"module {package_name!r} has no attribute {name!r}")

    return __getattr__
