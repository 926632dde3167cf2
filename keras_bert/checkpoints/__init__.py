"""Checkpoints: original TF1 and HuggingFace checkpoints into a `BertEncoder`,
and every map between their variable names and ours (`load`)."""

from keras_bert.checkpoints.load import (  # noqa: F401
    HEAD_TENSORS, assign_encoder_weights, assign_head_weights, convert, encoder_variables,
    head_variables, load_huggingface, load_pretrained, load_pretrainer, load_tf1,
    read_huggingface, read_tf1_checkpoint)

__all__ = ["HEAD_TENSORS", "assign_encoder_weights", "assign_head_weights", "convert",
           "encoder_variables", "head_variables", "load_huggingface", "load_pretrained",
           "load_pretrainer", "load_tf1", "read_huggingface", "read_tf1_checkpoint"]

from keras_bert._lazy import submodule_getattr  # noqa: E402

__getattr__ = submodule_getattr(__name__, __path__)
