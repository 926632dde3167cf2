"""Keras finds keras_bert's classes in saved files after a plain `import keras_bert`.

Keras' loader looks a saved class up by its registered name
(`keras_bert>BertClassifier`) and imports the module a config names only for
Keras' own packages, so every class must be registered before `load_model`
runs. The package imports its models on first use (a data command never
imports Keras), so it cannot simply import them all. Instead, as soon as
Keras' registry exists (now, or when Keras is imported later), each name gets
a stand-in whose `from_config` imports the real class and hands over; the
real class takes its place in the registry when its module is imported.

`SERIALIZABLE` must list every registered class: a test imports the whole
package and compares.
"""

import importlib
import importlib.abc
import importlib.util
import sys

PACKAGE = "keras_bert"
# Keras' registry of custom objects (`GLOBAL_CUSTOM_OBJECTS`).
REGISTRY_MODULE = "keras.src.saving.object_registration"

# Registered class name -> the module that defines it.
SERIALIZABLE = {
    "BertEncoder": "keras_bert.models.encoder",
    "BertClassifier": "keras_bert.models.classifier",
    "MultiLabelF1": "keras_bert.models.classifier",
    "BertFeatureExtractor": "keras_bert.models.feature_extractor",
    "BertSentenceEncoder": "keras_bert.models.sentence_encoder",
    "MultipleNegativesRankingLoss": "keras_bert.models.contrastive",
    "CoSENTLoss": "keras_bert.models.contrastive",
    "BertSpanExtractor": "keras_bert.models.span_extractor",
    "BertTokenClassifier": "keras_bert.models.token_classifier",
    "BertPretrainer": "keras_bert.models.pretrainer",
    "ModernBertEncoder": "keras_bert.models.modernbert",
    "ModernBertMaskedLM": "keras_bert.models.modernbert_masked_lm",
    "ModernBertPretrainer": "keras_bert.models.modernbert_pretrainer",
    "ModernBertElectraPretrainer": "keras_bert.models.modernbert_electra",
    "ElectraDiscriminator": "keras_bert.models.electra",
    "ElectraGenerator": "keras_bert.models.electra",
    "ElectraPretrainer": "keras_bert.models.electra_pretrainer",
    "BertPreprocessor": "keras_bert.preprocessing.preprocessor",
    "PositionEmbedding": "keras_bert.layers.embeddings",
    "AttentionMaskBias": "keras_bert.layers.embeddings",
    "MeanPool": "keras_bert.layers.sentence_pooling",
    "WeightedLayerSum": "keras_bert.layers.pooling",
    "SentencePooling": "keras_bert.layers.sentence_pooling",
    "L2Normalize": "keras_bert.layers.sentence_pooling",
    "SpanHead": "keras_bert.layers.task_heads",
    "BiLSTMHead": "keras_bert.layers.task_heads",
    "MaskedLMHead": "keras_bert.layers.pretraining_heads",
    "NextSentenceHead": "keras_bert.layers.pretraining_heads",
    "ReplacedTokenHead": "keras_bert.layers.electra_heads",
    "ReplacedTokens": "keras_bert.layers.electra_heads",
    "SelfAttention": "keras_bert.layers.transformer",
    "TransformerBlock": "keras_bert.layers.transformer",
    "SlidingWindowMaskBias": "keras_bert.layers.modernbert_block",
    "RotarySelfAttention": "keras_bert.layers.modernbert_block",
    "GatedFeedForward": "keras_bert.layers.modernbert_block",
    "PreNormBlock": "keras_bert.layers.modernbert_block",
    "PredictionHead": "keras_bert.layers.modernbert_heads",
    "ModernBertMaskedLMHead": "keras_bert.layers.modernbert_heads",
    "FastDense": "keras_bert.kernels.dense",
    "FastDropout": "keras_bert.kernels.dropout",
    "FastLayerNorm": "keras_bert.kernels.layer_norm",
    "WarmupLinearDecay": "keras_bert.training.optimization",
    "AdamW": "keras_bert.training.optimization",
    "Lamb": "keras_bert.training.optimization",
    "EntityF1": "keras_bert.datasets.entity_f1",
}


class _Deferred:
    """Stands in for one keras_bert class in Keras' registry until its module loads."""

    def __init__(self, class_name: str, module: str) -> None:
        self.class_name = class_name
        self.module = module

    def real_class(self) -> type:
        return getattr(importlib.import_module(self.module), self.class_name)

    def from_config(self, config: dict):
        return self.real_class().from_config(config)

    def __repr__(self) -> str:
        return f"<{self.module}.{self.class_name}, imported when first loaded>"


def _register(custom_objects: dict) -> None:
    for class_name, module in SERIALIZABLE.items():
        # setdefault: a class already imported stays registered as itself.
        custom_objects.setdefault(f"{PACKAGE}>{class_name}", _Deferred(class_name, module))


class _AfterRegistryImport(importlib.abc.MetaPathFinder):
    """Registers the stand-ins right after Keras' registry module runs."""

    def find_spec(self, fullname, path, target=None):
        if fullname != REGISTRY_MODULE:
            return None
        sys.meta_path.remove(self)  # once; and the lookup below must not find us
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        run_module = spec.loader.exec_module

        def run_then_register(module):
            run_module(module)
            _register(module.GLOBAL_CUSTOM_OBJECTS)

        spec.loader.exec_module = run_then_register
        return spec


def register_serializable_classes() -> None:
    """Every class in `SERIALIZABLE` known to Keras' loader, without importing Keras."""
    registry = sys.modules.get(REGISTRY_MODULE)
    if registry is not None:
        _register(registry.GLOBAL_CUSTOM_OBJECTS)
    elif not any(isinstance(finder, _AfterRegistryImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AfterRegistryImport())
