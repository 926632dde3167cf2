"""`get_config` / `from_config` for a class whose saved config is its
constructor's arguments, each kept as an attribute of the same name.

    class CoSENTLoss(ConfigFields):
        config_fields = ("scale", "mini_batch_size")

A class that keeps more (a serialized sub-object, a preprocessor) adds it in
an override that calls `super().get_config()`. Its constructor keeps the
fields with `keep_config_fields(self, locals())`.
"""

from __future__ import annotations

from typing import Any, Mapping, TypeVar

import keras

Configured = TypeVar("Configured", bound="ConfigFields")


def keep_config_fields(owner: Any, arguments: Mapping[str, Any]) -> None:
    """Keeps each of `owner.config_fields` that `arguments` (its constructor's
    `locals()`) holds as the attribute of the same name; `name` and
    `trainable` arrive in a Keras object's keyword arguments, kept by Keras."""
    for field in owner.config_fields:
        if field in arguments:
            setattr(owner, field, arguments[field])


class ConfigFields:
    """Mixin: the config is `config_fields`, read off the object; it comes
    before a Keras base class so these two replace Keras' own."""

    config_fields: tuple[str, ...] = ()

    def get_config(self) -> dict:
        return {field: getattr(self, field) for field in self.config_fields}

    @classmethod
    def from_config(cls: type[Configured], config: dict[str, Any]) -> Configured:
        return cls(**config)


class EncoderConfigFields(ConfigFields):
    """Mixin for a model built around `self.encoder` (the pretrainers, ELECTRA's
    heads): its config is the encoder, serialized whole, then `config_fields`."""

    def get_config(self) -> dict:
        return {
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            **super().get_config(),
        }
