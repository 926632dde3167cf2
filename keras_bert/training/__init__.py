"""Training: the training step of any model (`steps`), MLM + NSP pretraining
(`pretraining`), fine-tuning (`finetuning`), AdamW / LAMB with warmup and decay
(`optimization`), tf.distribute strategies (`distribute`)."""

from keras_bert._lazy import submodule_getattr

__getattr__ = submodule_getattr(__name__, __path__)
