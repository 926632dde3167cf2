"""Export: SavedModels with tokenization inside, one module per task family
(`classifier`, `tagger`, `squad`, `sentence_encoder`, which also serves a bare
encoder's embeddings, on `base`), written by `saved_model`; `serving_ops`
checks what TensorFlow Serving can run."""

from keras_bert.export.saved_model import export_model_dir, export_saved_model  # noqa: F401

__all__ = ["export_model_dir", "export_saved_model"]

from keras_bert._lazy import submodule_getattr  # noqa: E402

__getattr__ = submodule_getattr(__name__, __path__)
