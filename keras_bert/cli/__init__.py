"""The `keras-bert` command (`commands`, and a module `<command>_command` per
subcommand), the quickstart, and how the command starts: lean TensorFlow
imports (`startup`) and quiet C++ logs (`native_logs`)."""

from keras_bert.cli.commands import build_parser, command_reference, main  # noqa: F401

__all__ = ["build_parser", "command_reference", "main"]

from keras_bert._lazy import submodule_getattr  # noqa: E402

__getattr__ = submodule_getattr(__name__, __path__)
