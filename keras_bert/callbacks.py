"""Keras callbacks for runs that survive kills, as `keras-bert finetune` uses
them: `ExactResume`, `BestOnDev`, `TrainLog`, `StopOnNonFiniteLoss`
(`keras_bert.training.callbacks` says how they work together)."""

from keras_bert.training.callbacks import BestOnDev, ExactResume, StopOnNonFiniteLoss, TrainLog

__all__ = ["BestOnDev", "ExactResume", "StopOnNonFiniteLoss", "TrainLog"]
