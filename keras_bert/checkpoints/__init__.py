"""Checkpoints: reading pretrained sources (HuggingFace, original TF1, `.keras`,
`keras-bert finetune` outputs) and every map between their variable names and
ours (`load`), their casing (`casing`), one resolver for them all (`source`),
names found in the local caches (`caches`), and the original scripts'
fine-tuned heads (`task_heads`). Models are built a layer up:
`BertEncoder.from_pretrained`."""

from keras_bert.checkpoints.casing import Casing, casing_from_vocabulary  # noqa: F401
from keras_bert.checkpoints.load import (  # noqa: F401
    HEAD_TENSORS,
    TASK_HEAD_TENSORS,
    assign_encoder_weights,
    assign_head_weights,
    encoder_variables,
    head_variables,
    read_huggingface,
    read_tf1_checkpoint,
)
from keras_bert.checkpoints.source import (  # noqa: F401
    PretrainedSource,
    decide_lowercase,
    resolve,
    tokenizer_options,
    tokenizer_settings,
)
from keras_bert.checkpoints.task_heads import load_original_task_head  # noqa: F401

__all__ = [
    "HEAD_TENSORS",
    "TASK_HEAD_TENSORS",
    "Casing",
    "PretrainedSource",
    "assign_encoder_weights",
    "assign_head_weights",
    "casing_from_vocabulary",
    "decide_lowercase",
    "encoder_variables",
    "head_variables",
    "load_original_task_head",
    "read_huggingface",
    "read_tf1_checkpoint",
    "resolve",
    "tokenizer_options",
    "tokenizer_settings",
]

from keras_bert._lazy import submodule_getattr  # noqa: E402

__getattr__ = submodule_getattr(__name__, __path__)
