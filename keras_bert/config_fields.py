"""`get_config` / `from_config` for a class whose saved config is its
constructor's arguments, each kept as an attribute of the same name.

    class CoSENTLoss(ConfigFields):
        config_fields = ("scale", "mini_batch_size")

A class that keeps more (a serialized sub-object, a preprocessor) adds it in
an override that calls `super().get_config()`.
"""

from __future__ import annotations

from typing import Any, TypeVar

Configured = TypeVar("Configured", bound="ConfigFields")


class ConfigFields:
    """Mixin: the config is `config_fields`, read off the object; it comes
    before a Keras base class so these two replace Keras' own."""

    config_fields: tuple[str, ...] = ()

    def get_config(self) -> dict:
        return {field: getattr(self, field) for field in self.config_fields}

    @classmethod
    def from_config(cls: type[Configured], config: dict[str, Any]) -> Configured:
        return cls(**config)
