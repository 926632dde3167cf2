"""Pretraining data: a corpus becomes TFRecords of masked-LM / next-sentence
instances in the original BERT feature format, and tf.data reads them back.

In the order data flows: `options` (settings, the arrays between stages),
`reading` (documents in blocks, tokenized), `instances` (sentence pairs),
`static_masking` (80/10/10, whole words), `records` (tf.Example encoding),
`workers` (one block end to end, the process pool), `create` (the run: shards,
summary), `beam` (the same on Apache Beam); `inputs` reads records into
tf.data, masking on the fly with `dynamic_masking` if asked.
"""

from keras_bert.pretraining_data.create import Summary, create_pretraining_data  # noqa: F401
from keras_bert.pretraining_data.options import PretrainingOptions  # noqa: F401

__all__ = ["PretrainingOptions", "Summary", "create_pretraining_data"]

from keras_bert._lazy import submodule_getattr  # noqa: E402

__getattr__ = submodule_getattr(__name__, __path__)
