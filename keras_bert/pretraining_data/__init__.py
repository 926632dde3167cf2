"""Pretraining data: a corpus becomes TFRecords of masked-LM / next-sentence
instances in the original BERT feature format (`create`, or `beam` on Apache
Beam), and tf.data reads them back (`inputs`), masking on the fly if asked
(`dynamic_masking`)."""

from keras_bert.pretraining_data.create import (  # noqa: F401
    PretrainingOptions, Summary, create_pretraining_data)

__all__ = ["PretrainingOptions", "Summary", "create_pretraining_data"]

from keras_bert._lazy import submodule_getattr  # noqa: E402

__getattr__ = submodule_getattr(__name__, __path__)
