"""The one cattrs converter for ACP wire values, and structured-error helpers.

Rules (architecture.md "Models and codecs"): camelCase rename factories are
registered first, then the tagged unions (which capture the hooks they find);
only fields whose default is None are omitted; unknown keys are allowed on
input; unknown discriminators land in a raw fallback class.
"""

from __future__ import annotations

import functools
import re
from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override
from cattrs.strategies import configure_tagged_union

from . import models

T = TypeVar("T")


def to_camel(name: str) -> str:
    if name == "meta":
        return "_meta"
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _overrides(cls: type) -> dict[str, Any]:
    result = {}
    for field in attrs.fields(cls):
        result[field.name] = override(
            rename=to_camel(field.name),
            omit_if_default=field.default is None,
        )
    return result


def _tag(cl: type) -> str:
    tag = getattr(cl, "TAG", None)
    return tag if isinstance(tag, str) else cl.__name__


@functools.cache
def converter() -> cattrs.Converter:
    """The shared converter (built once)."""
    conv = cattrs.Converter()

    def _is_model(cls: type) -> bool:
        return attrs.has(cls) and cls.__module__ == models.__name__

    conv.register_structure_hook_factory(
        _is_model, lambda cls: make_dict_structure_fn(cls, conv, **_overrides(cls))
    )
    conv.register_unstructure_hook_factory(
        _is_model, lambda cls: make_dict_unstructure_fn(cls, conv, **_overrides(cls))
    )
    # JSON has no implicit conversions: "3" is not an int and 3 is not a str.
    conv.register_structure_hook(str, _strict(str))
    conv.register_structure_hook(int, _strict(int))
    conv.register_structure_hook(float, _strict_number)
    conv.register_structure_hook(bool, _strict(bool))
    conv.register_structure_hook(
        models.UnknownContent, lambda raw, _: models.UnknownContent(raw=raw)
    )
    conv.register_unstructure_hook(models.UnknownContent, lambda value: dict(value.raw))
    configure_tagged_union(
        models.ContentBlock,
        conv,
        tag_generator=_tag,
        tag_name="type",
        default=models.UnknownContent,
    )
    configure_tagged_union(models.ToolCallContent, conv, tag_generator=_tag, tag_name="type")
    configure_tagged_union(models.SessionUpdate, conv, tag_generator=_tag, tag_name="sessionUpdate")
    return conv


def _strict(kind: type[T]) -> Any:
    def hook(value: Any, _: Any) -> T:
        # bool is an int subclass, but true is not a number in JSON.
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise TypeError(f"expected {_JSON_NAMES[kind]}, got {_json_type(value)}")
        return value

    return hook


def _strict_number(value: Any, _: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {_json_type(value)}")
    return float(value)


_JSON_NAMES: dict[type, str] = {str: "a string", int: "an integer", bool: "a boolean"}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def structure(data: Any, cls: type[T]) -> T:
    """Structure wire data; raises ``cattrs.BaseValidationError`` on bad input."""
    if not isinstance(data, dict):
        raise TypeError(f"expected a JSON object, got {type(data).__name__}")
    return converter().structure(data, cls)


def unstructure(value: Any) -> Any:
    return converter().unstructure(value)


def describe_error(exc: Exception) -> list[str]:
    """Human-readable paths for a structuring failure (``... @ $.prompt[0]``)."""
    if isinstance(exc, cattrs.BaseValidationError):
        return [_camel_path(line) for line in cattrs.transform_error(exc)]
    return [str(exc)]


def _camel_path(line: str) -> str:
    message, sep, path = line.rpartition(" @ ")
    if not sep:
        return line
    return f"{message} @ " + re.sub(r"\.([a-z_]+)", lambda m: "." + to_camel(m.group(1)), path)
