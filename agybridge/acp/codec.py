"""The one cattrs converter for ACP wire values, and structured-error helpers.

Rules (architecture.md "Models and codecs"): camelCase rename factories are
registered first, then the tagged unions (which capture the hooks they find);
only fields whose default is None are omitted; unknown keys are allowed on
input; unknown discriminators land in a raw fallback class.
"""

from __future__ import annotations

import functools
import re
from typing import Any, TypeVar, get_origin

import attrs
import cattrs
from cattrs.cols import list_structure_factory
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override
from cattrs.strategies import configure_tagged_union

from . import models

T = TypeVar("T")

#: Where the ACP models live (models.py loads session_models.py on first use).
_SESSION_MODELS = f"{__package__}.session_models"
_MODEL_MODULES = frozenset({models.__name__, _SESSION_MODELS})


def to_camel(name: str) -> str:
    if name == "meta":
        return "_meta"
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _omitted_when_unset(field: attrs.Attribute[Any]) -> bool:
    """Only fields whose default is None are left out (when None): discriminators
    and other defaults are always written."""
    return field.default is None


def _overrides(cls: type) -> dict[str, Any]:
    result = {}
    for field in attrs.fields(cls):
        result[field.name] = override(
            rename=to_camel(field.name),
            omit_if_default=_omitted_when_unset(field),
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
        return attrs.has(cls) and cls.__module__ in _MODEL_MODULES

    conv.register_structure_hook_factory(_is_model, lambda cls: _object_model(cls, conv))
    conv.register_unstructure_hook_factory(
        _is_model, lambda cls: make_dict_unstructure_fn(cls, conv, **_overrides(cls))
    )
    # JSON has no implicit conversions: "3" is not an int and 3 is not a str.
    conv.register_structure_hook(str, _strict(str))
    conv.register_structure_hook(int, _strict(int))
    conv.register_structure_hook(float, _strict_number)
    conv.register_structure_hook(bool, _strict(bool))
    conv.register_structure_hook_factory(_is_list, lambda t: _strict_list(t, conv))
    conv.register_structure_hook_factory(_is_dict, lambda t: _strict_dict(t, conv))
    # The tagged unions are configured when a union value is first converted:
    # initialize needs none, and configuring them generates every member's
    # hooks (~25 ms of a cold start). Until then a union's hook is a
    # stand-in; configuring (in the same order as ever, after the hooks above)
    # retires the stand-ins, and each then calls the union's own hook.
    configured = False

    def pending(t: Any) -> bool:
        # Only a union of session models can be one of them: asked first, as
        # naming the unions loads those models (initialize needs none).
        args: tuple[Any, ...] = getattr(t, "__args__", ())
        return (
            not configured
            and bool(args)
            and getattr(args[0], "__module__", None) == _SESSION_MODELS
            and t in (models.ContentBlock, models.ToolCallContent, models.SessionUpdate)
        )

    def configure() -> None:
        nonlocal configured
        if not configured:
            configured = True
            _configure_unions(conv)

    def stand_in(union: Any, get_hook: Any) -> Any:
        hook: Any = None

        def first_call(*args: Any) -> Any:
            nonlocal hook
            if hook is None:
                configure()
                hook = get_hook(union)
            return hook(*args)

        return first_call

    conv.register_structure_hook_factory(pending, lambda t: stand_in(t, conv.get_structure_hook))
    conv.register_unstructure_hook_factory(
        pending, lambda t: stand_in(t, conv.get_unstructure_hook)
    )
    return conv


def _configure_unions(conv: cattrs.Converter) -> None:
    # An unknown block is only ever read as a ContentBlock (its union's default).
    conv.register_structure_hook(models.UnknownContent, _structure_unknown_content)
    configure_tagged_union(
        models.ContentBlock,
        conv,
        tag_generator=_tag,
        tag_name="type",
        default=models.UnknownContent,
    )
    # A block that is not an object never reaches the default's own check: the
    # tagged hook fails first, with no message a client could act on.
    structure_block = conv.get_structure_hook(models.ContentBlock)

    def structure_object_block(raw: Any, cl: Any) -> Any:
        if not isinstance(raw, dict):
            raise JsonTypeError(f"expected a content block object, got {_json_type(raw)}")
        return structure_block(raw, cl)

    conv.register_structure_hook(models.ContentBlock, structure_object_block)
    # An unknown block is written back exactly as it was read (its own "type").
    tagged = conv.get_unstructure_hook(models.ContentBlock)
    conv.register_unstructure_hook(
        models.ContentBlock,
        lambda value: (
            dict(value.raw) if isinstance(value, models.UnknownContent) else tagged(value)
        ),
    )
    configure_tagged_union(models.ToolCallContent, conv, tag_generator=_tag, tag_name="type")
    configure_tagged_union(models.SessionUpdate, conv, tag_generator=_tag, tag_name="sessionUpdate")


def _is_list(t: Any) -> bool:
    return get_origin(t) is list


def _is_dict(t: Any) -> bool:
    return get_origin(t) is dict


class JsonTypeError(TypeError):
    """A wire value of the wrong JSON type, said in JSON terms ("expected an
    object, got null"): the message is the problem a client reads."""


def _object_model(cls: type, conv: cattrs.Converter) -> Any:
    # Without this a null or a string fails inside the generated hook, with
    # Python's words ("argument of type 'NoneType' is not iterable").
    base: Any = make_dict_structure_fn(cls, conv, **_overrides(cls))

    def hook(value: Any, cl: Any) -> Any:
        if not isinstance(value, dict):
            raise JsonTypeError(f"expected an object, got {_json_type(value)}")
        return base(value, cl)

    return hook


def _strict_list(t: Any, conv: cattrs.Converter) -> Any:
    # cattrs would take any iterable: "hi" as ["h", "i"], {} as [].
    base = list_structure_factory(t, conv)

    def hook(value: Any, cl: Any) -> Any:
        if not isinstance(value, list):
            raise JsonTypeError(f"expected an array, got {_json_type(value)}")
        return base(value, cl)

    return hook


def _strict_dict(t: Any, conv: cattrs.Converter) -> Any:
    base = conv.gen_structure_mapping(t)

    def hook(value: Any, cl: Any) -> Any:
        if not isinstance(value, dict):
            raise JsonTypeError(f"expected an object, got {_json_type(value)}")
        return base(value, cl)

    return hook


def _structure_unknown_content(raw: Any, _: Any) -> models.UnknownContent:
    if not isinstance(raw, dict):
        raise JsonTypeError(f"expected a content block object, got {_json_type(raw)}")
    return models.UnknownContent(raw=raw)


def _strict(kind: type[T]) -> Any:
    def hook(value: Any, _: Any) -> T:
        # bool is an int subclass, but true is not a number in JSON.
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise JsonTypeError(f"expected {_JSON_NAMES[kind]}, got {_json_type(value)}")
        return value

    return hook


def _strict_number(value: Any, _: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise JsonTypeError(f"expected a number, got {_json_type(value)}")
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


def unstructure_plain(value: Any) -> Any:
    """`unstructure` for values without tagged unions or enums (the ``initialize`` answer),
    by reflection: the same wire value (`to_camel`, `_omitted_when_unset`) without the
    per-class hooks cattrs generates on first use (~3 ms of a cold start's answer).
    A union member would lose its discriminator here: use `unstructure`.
    tests/unit/acp/test_acp_codec.py compares both on generated values."""
    if attrs.has(type(value)):
        wire = {}
        for field in attrs.fields(type(value)):
            item = getattr(value, field.name)
            if item is None and _omitted_when_unset(field):
                continue
            wire[to_camel(field.name)] = unstructure_plain(item)
        return wire
    if isinstance(value, dict):
        return {key: unstructure_plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [unstructure_plain(item) for item in value]  # as cattrs: tuples too
    return value


def describe_error(exc: Exception) -> list[str]:
    """Human-readable paths for a structuring failure (``... @ $.prompt[0]``)."""
    if isinstance(exc, cattrs.BaseValidationError):
        return [
            _camel_path(line)
            for line in cattrs.transform_error(exc, format_exception=_format_exception)
        ]
    return [str(exc)]


def _format_exception(exc: BaseException, type: Any) -> str:
    # This module's own hooks say what was expected in JSON terms.
    if isinstance(exc, JsonTypeError):
        return str(exc)
    return cattrs.v.format_exception(exc, type)


def _camel_path(line: str) -> str:
    message, sep, path = line.rpartition(" @ ")
    if not sep:
        return line
    return f"{message} @ " + re.sub(r"\.([a-z_]+)", lambda m: "." + to_camel(m.group(1)), path)


def unstructure_prompt_response(response: models.PromptResponse) -> dict[str, Any]:
    """``unstructure(response)`` for a ``_meta`` of plain JSON values (what a
    turn's answer carries: usage counts), without the converter's walk over
    it; every turn is answered with one. A generated-input test compares both."""
    wire: dict[str, Any] = {"stopReason": response.stop_reason}
    if response.meta is not None:
        wire["_meta"] = response.meta
    return wire


_PROMPT_KEYS = frozenset({"sessionId", "prompt"})
_TEXT_BLOCK_KEYS = frozenset({"type", "text"})


def structure_plain_prompt(data: Any) -> models.PromptRequest | None:
    """``structure(data, PromptRequest)`` for the usual prompt, text blocks
    without annotations or ``_meta``, without the converter; None for any other
    shape (the converter decides). A generated-input test compares both."""
    if type(data) is not dict or data.keys() != _PROMPT_KEYS:
        return None
    session_id, blocks = data["sessionId"], data["prompt"]
    if type(session_id) is not str or type(blocks) is not list:
        return None
    prompt: list[models.ContentBlock] = []
    for block in blocks:
        if (
            type(block) is not dict
            or block.keys() != _TEXT_BLOCK_KEYS
            or block["type"] != "text"
            or type(block["text"]) is not str
        ):
            return None
        prompt.append(models.TextContent(text=block["text"]))
    return models.PromptRequest(session_id=session_id, prompt=prompt)
