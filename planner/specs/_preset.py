"""Shared machinery for specs that can be given as a preset name plus overrides."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator


class PresetSpec(BaseModel):
    """A frozen spec that accepts ``"name"`` or ``{"preset": "name", **overrides}``.

    Subclasses set ``_presets``: a mapping from preset name to the field values.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    _presets: ClassVar[dict[str, dict[str, Any]]] = {}

    @model_validator(mode="before")
    @classmethod
    def _expand_preset(cls, data: Any) -> Any:
        if isinstance(data, str):
            data = {"preset": data}
        if isinstance(data, dict) and "preset" in data:
            data = dict(data)
            name = data.pop("preset")
            presets = cls._presets
            if name not in presets:
                known = ", ".join(sorted(presets))
                raise ValueError(f"unknown preset {name!r}; known presets: {known}")
            data = _merge(presets[name], data)
        return data

    @classmethod
    def preset_names(cls) -> list[str]:
        return sorted(cls._presets)

    @classmethod
    def from_preset(cls, name: str, **overrides: Any):  # noqa: ANN206 - returns cls
        return cls.model_validate({"preset": name, **overrides})


def _merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Overrides win; a nested dict given without its own ``preset`` is merged field by field,
    so ``{"preset": "dgx-h100", "inter_node": {"bandwidth_gb_per_s": 100}}`` keeps the rest of
    the preset's inter-node link."""
    out = dict(base)
    for key, value in overrides.items():
        old = out.get(key)
        if isinstance(old, dict) and isinstance(value, dict) and "preset" not in value:
            out[key] = _merge(old, value)
        else:
            out[key] = value
    return out
