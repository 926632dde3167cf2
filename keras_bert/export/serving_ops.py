"""Which non-core ops a SavedModel needs, and whether TensorFlow Serving has them.

TensorFlow Serving's model server links tensorflow-text's kernels, often an
older release than the tensorflow-text we build with. This project targets the
ops of tensorflow-text 2.12 (`SERVING_TEXT_OPS`): a SavedModel using an op added
later (for instance `TFText>RoundRobinTrim`) loads here but fails in such a
server with "Op type not registered". Exporters check their SavedModels with
`ops_serving_lacks` / `custom_ops_in_saved_model`.
"""

from __future__ import annotations

import os

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

# Op types of tensorflow-text 2.12 (conservative: ops added around or after
# 2.10-2.13 whose first release is uncertain are left out, so a false alarm is
# possible but a SavedModel passing the check loads in TF Serving 2.12+).
SERVING_TEXT_OPS = frozenset(
    {
        # normalisation
        "CaseFoldUTF8",
        "NormalizeUTF8",
        "NormalizeUTF8WithOffsetsMap",
        "FindSourceOffsets",
        "FastBertNormalize",
        # tokenizers
        "RegexSplitWithOffsets",
        "WordpieceTokenizeWithOffsets",
        "WhitespaceTokenizeWithOffsets",
        "UnicodeScriptTokenizeWithOffsets",
        "SplitMergeTokenizeWithOffsets",
        "TokenizerFromLogits",
        "FastWordpieceTokenizeWithOffsets",
        "TFText>FastWordpieceDetokenize",
        "TFText>WhitespaceTokenizeWithOffsetsV2",
        "SentencepieceOp",
        "SentencepieceTokenizeOp",
        "SentencepieceTokenizeWithOffsetsOp",
        "SentencepieceDetokenizeOp",
        "SentencepieceVocabSizeOp",
        "SentencepieceIdToStringOp",
        "SentencepieceStringToIdOp",
        # other text ops
        "SentenceFragments",
        "TFText>NgramsStringJoin",
        "ConstrainedSequence",
        "MaxSpanningTree",
        "RougeL",
    }
)
# Never allowed: TFText>RoundRobinTrim / RoundRobinGenerateMasks (RoundRobinTrimmer,
# MaskValuesChooser-era ops), TFText>ByteSplit*, TFText>Utf8Binarize,
# TFText>BoiseTagsToOffsets / OffsetsToBoiseTags, PhraseTokenize,
# TFText>FastSentencepiece*, SentenceFragmentsV2.


def _is_core_op(op_type):
    # Every public op TensorFlow registers has a generated wrapper in tf.raw_ops;
    # ops loaded from tensorflow-text's shared objects do not (nor do TF's
    # internal XLA / TPU ops, which a model server may lack just as well).
    return hasattr(tf.raw_ops, op_type)


def ops_in_saved_model(path: str | os.PathLike) -> set[str]:
    """Every op type in a SavedModel's graphs, function library included."""
    with tf.io.gfile.GFile(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved_model = saved_model_pb2.SavedModel.FromString(f.read())
    ops = set()
    for meta_graph in saved_model.meta_graphs:
        graph = meta_graph.graph_def
        functions = {fn.signature.name for fn in graph.library.function}
        nodes = list(graph.node)
        for fn in graph.library.function:
            nodes.extend(fn.node_def)
        ops.update(node.op for node in nodes if node.op not in functions)
    return ops


def custom_ops_in_saved_model(path: str | os.PathLike) -> set[str]:
    """The op types a SavedModel uses that core TensorFlow does not register."""
    return {op for op in ops_in_saved_model(path) if not _is_core_op(op)}


def ops_serving_lacks(path: str | os.PathLike) -> list[str]:
    """Custom ops of the SavedModel outside `SERVING_TEXT_OPS`, sorted."""
    return sorted(custom_ops_in_saved_model(path) - SERVING_TEXT_OPS)
