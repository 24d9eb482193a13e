"""Read and check a matrix file (stdlib ``tomllib``); every problem names its line.

Unknown keys, wrong types, missing files and bad regexes or conditions are
`MatrixError`s that say ``FILE:LINE: what is wrong``, so a CI engineer can fix the
file without reading this code. Relative paths are relative to the matrix file.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from .condition import ConditionError, parse_condition
from .lineindex import LineIndex
from .model import PLACEHOLDER, Budget, Case, Expect, Matrix, RunConfig
from .schemas import closed_set

T = TypeVar("T")
KeyPath = tuple[str | int, ...]

_TOP = ("run", "matrix", "vars", "case")
_TABLES = ("include", "exclude")
_AXIS_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_RUN = ("concurrency", "timeout_s", "retries", "retry_max_wait_s", "workspace", "env")
_CASE = (
    "name",
    "prompt",
    "prompts",
    "attachments",
    "env",
    "skip_if",
    "exclude",
    "permissions",
    "set_config",
    "expect",
    "budget",
)
_EXPECT = (
    "contains",
    "not_contains",
    "regex",
    "json_schema",
    "stop_reason",
    "tool_kinds",
    "tool_attempts",
    "no_tools",
    "not_tool_kinds",
    "images",
    "error",
    "listed",
    "files",
    "files_absent",
    "max_seconds",
    "max_tokens",
)
_BUDGET = ("max_tokens", "max_seconds")


class MatrixError(Exception):
    """The matrix file is invalid; ``str()`` is ``FILE:LINE: message``."""

    def __init__(self, path: Path, line: int | None, message: str) -> None:
        self.path, self.line, self.message = path, line, message
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")


def load_matrix(path: Path) -> Matrix:
    """Parse and check ``path``; raises `MatrixError`."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MatrixError(path, None, f"cannot read the matrix: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        line = int(match.group(1)) if match else None
        raise MatrixError(path, line, f"not valid TOML: {exc}") from None
    return _Reader(path, LineIndex(text)).matrix(data)


def _describe(value: Any) -> str:
    kind = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}.get(
        type(value), "a table" if isinstance(value, dict) else "an array"
    )
    return f"{kind} ({json.dumps(value, default=str)[:60]})"


def _dotted(path: KeyPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


class _Reader:
    def __init__(self, path: Path, lines: LineIndex) -> None:
        self.path = path
        self.base = path.parent
        self.lines = lines
        self.warnings: list[str] = []

    def fail(self, where: KeyPath, message: str) -> MatrixError:
        return MatrixError(self.path, self.lines.line(where), message)

    # -- typed getters

    def table(self, value: Any, where: KeyPath, known: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, f"{_dotted(where)} must be a table, not {_describe(value)}")
        for key in value:
            if key not in known:
                raise self.fail(
                    (*where, key),
                    f"unknown key {_dotted((*where, key))!r} (known: {', '.join(known)})",
                )
        return value

    def typed(self, value: Any, where: KeyPath, kind: type[T], noun: str) -> T:
        # bool is an int: `concurrency = true` must not pass as 1.
        ok = isinstance(value, kind) and not (isinstance(value, bool) and kind is not bool)
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)  # type: ignore[return-value]
        if not ok:
            raise self.fail(where, f"{_dotted(where)} must be {noun}, not {_describe(value)}")
        return value  # type: ignore[no-any-return]

    def positive(self, value: Any, where: KeyPath, kind: type[float] | type[int]) -> Any:
        number = self.typed(value, where, kind, "a number" if kind is float else "an integer")
        if number <= 0:
            raise self.fail(where, f"{_dotted(where)} must be greater than 0, not {number}")
        return number

    def strings(self, value: Any, where: KeyPath, *, one_ok: bool = True) -> tuple[str, ...]:
        if one_ok and isinstance(value, str):
            return (value,)
        noun = "a string or an array of strings" if one_ok else "an array of strings"
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(where, f"{_dotted(where)} must be {noun}, not {_describe(value)}")
        return tuple(value)

    def string_map(self, value: Any, where: KeyPath) -> dict[str, str]:
        table = self.typed(value, where, dict, "a table of strings")
        for key, item in table.items():
            self.typed(item, (*where, key), str, "a string")
        return dict(table)

    def file(self, value: Any, where: KeyPath, *, directory: bool = False) -> Path:
        text = self.typed(value, where, str, "a path (string)")
        path = (self.base / text).resolve()
        exists = path.is_dir() if directory else path.is_file()
        if not exists:
            what = "directory" if directory else "file"
            raise self.fail(where, f"{_dotted(where)}: no such {what}: {path}")
        return path

    # -- sections

    def matrix(self, data: dict[str, Any]) -> Matrix:
        self.table(data, (), _TOP)
        run = self.run(data.get("run", {}))
        axes, include, exclude = self.axes(data.get("matrix", {}))
        variables = self.string_map(data.get("vars", {}), ("vars",))
        names = set(variables) | set(axes) | {k for entry in include for k in entry}
        raw_cases = data.get("case")
        if raw_cases is None:
            raise MatrixError(self.path, None, "no [[case]]: the matrix has nothing to run")
        if not isinstance(raw_cases, list):
            raise self.fail(("case",), "case must be an array of tables: write [[case]]")
        if not raw_cases:  # `case = []`: as empty as no [[case]] at all
            raise self.fail(("case",), "no [[case]]: the matrix has nothing to run")
        cases = [self.case(raw, ("case", i), axes, names) for i, raw in enumerate(raw_cases)]
        seen: dict[str, int] = {}
        for i, case in enumerate(cases):
            if case.name in seen:
                raise self.fail(
                    ("case", i, "name"),
                    f"case name {case.name!r} is used twice "
                    f"(cases {seen[case.name] + 1} and {i + 1})",
                )
            seen[case.name] = i
        return Matrix(
            self.path,
            run,
            axes,
            tuple(cases),
            include=include,
            exclude=exclude,
            variables=variables,
            warnings=tuple(self.warnings),
        )

    def run(self, raw: Any) -> RunConfig:
        where: KeyPath = ("run",)
        table = self.table(raw, where, _RUN)
        get: Callable[[str], KeyPath] = lambda key: (*where, key)  # noqa: E731
        retries = 0
        if "retries" in table:
            retries = self.typed(table["retries"], get("retries"), int, "an integer")
            if retries < 0:
                raise self.fail(get("retries"), f"run.retries must be 0 or more, not {retries}")
        return RunConfig(
            concurrency=self.positive(table.get("concurrency", 1), get("concurrency"), int),
            timeout_s=self.positive(table.get("timeout_s", 300), get("timeout_s"), float),
            retries=retries,
            retry_max_wait_s=self.positive(
                table.get("retry_max_wait_s", 60), get("retry_max_wait_s"), float
            ),
            workspace=(
                self.file(table["workspace"], get("workspace"), directory=True)
                if "workspace" in table
                else None
            ),
            env=self.string_map(table.get("env", {}), get("env")),
        )

    def axes(
        self, raw: Any
    ) -> tuple[dict[str, tuple[str, ...]], tuple[dict[str, str], ...], tuple[dict[str, str], ...]]:
        """The axes (known and custom), then the include and exclude entries."""
        where: KeyPath = ("matrix",)
        table = self.typed(raw, where, dict, "a table")
        axes: dict[str, tuple[str, ...]] = {}
        for axis, values in table.items():
            if axis in _TABLES:
                continue
            if not _AXIS_NAME.match(axis):
                raise self.fail(
                    (*where, axis), f"matrix.{axis}: an axis name is letters, digits, _ and -"
                )
            found = self.strings(values, (*where, axis), one_ok=False)
            if not found:
                raise self.fail((*where, axis), f"matrix.{axis} is empty: give at least one value")
            if len(set(found)) != len(found):
                raise self.fail((*where, axis), f"matrix.{axis} repeats a value")
            for index, value in enumerate(found):
                self.setting(axis, value, (*where, axis, index))
            axes[axis] = found
        entries = {name: self.entries(table.get(name, []), (*where, name)) for name in _TABLES}
        return axes, entries["include"], entries["exclude"]

    def entries(self, raw: Any, where: KeyPath) -> tuple[dict[str, str], ...]:
        """``include`` / ``exclude``: an array of tables of axis values."""
        if not isinstance(raw, list):
            raise self.fail(where, f"{_dotted(where)} must be an array of tables of axis values")
        found = []
        for index, entry in enumerate(raw):
            values = self.string_map(entry, (*where, index))
            if not values:
                raise self.fail((*where, index), f"{_dotted((*where, index))} is empty")
            for key, value in values.items():
                self.setting(key, value, (*where, index, key))
            found.append(values)
        return tuple(found)

    def setting(self, axis: str, value: str, where: KeyPath) -> None:
        """A mode or effort outside the bridge's closed set fails here, not at run time."""
        known = closed_set(axis)
        if known is not None and value.strip().lower() not in known:
            raise self.fail(
                where,
                f"{_dotted(where)}: {value!r} is not a valid {axis} (one of: {', '.join(known)})",
            )

    def placeholders(self, text: str, where: KeyPath, names: set[str]) -> str:
        for match in PLACEHOLDER.finditer(text):
            if match.group(1) not in names:
                known = ", ".join(sorted(names)) or "none"
                raise self.fail(
                    where,
                    f"{_dotted(where)}: {{{{{match.group(1)}}}}} is neither a [vars] entry "
                    f"nor an axis (known: {known})",
                )
        return text

    def case(self, raw: Any, where: KeyPath, axes: Mapping[str, Any], names: set[str]) -> Case:
        table = self.table(raw, where, _CASE)
        if "name" not in table:
            raise self.fail(where, f"case {where[1] + 1} has no name")  # type: ignore[operator]
        name = self.typed(table["name"], (*where, "name"), str, "a string")
        if not name.strip():
            raise self.fail((*where, "name"), "a case name cannot be empty")
        if ("prompt" in table) == ("prompts" in table):
            raise self.fail(where, f"case {name!r} needs exactly one of prompt or prompts")
        prompts: tuple[str, ...]
        if "prompt" in table:
            prompts = (self.typed(table["prompt"], (*where, "prompt"), str, "a string"),)
        else:
            prompts = self.strings(table["prompts"], (*where, "prompts"), one_ok=False)
            if not prompts:
                raise self.fail((*where, "prompts"), f"case {name!r}: prompts is empty")
        skip_if = None
        if "skip_if" in table:
            text = self.typed(table["skip_if"], (*where, "skip_if"), str, "a string")
            try:
                skip_if = parse_condition(text, axes.keys())
            except ConditionError as exc:
                raise self.fail((*where, "skip_if"), f"skip_if {text!r}: {exc}") from None
            line = self.lines.line((*where, "skip_if"))
            self.warnings.append(
                f"{self.path}:{line}: skip_if is deprecated and goes in the next release: "
                "write the combinations to leave out as exclude = [{ AXIS = VALUE, ... }]"
            )
        permissions = table.get("permissions", "allow")
        if permissions not in (closed_set("permissions") or ()):
            raise self.fail(
                (*where, "permissions"),
                f"permissions must be one of {', '.join(closed_set('permissions') or ())}, "
                f"not {_describe(permissions)}",
            )
        attachments = self.strings(table.get("attachments", []), (*where, "attachments"))
        for index, prompt in enumerate(prompts):
            at_prompt: KeyPath = (
                (*where, "prompts", index) if "prompts" in table else (*where, "prompt")
            )
            self.placeholders(prompt, at_prompt, names)
        env = self.string_map(table.get("env", {}), (*where, "env"))
        for key, value in env.items():
            self.placeholders(value, (*where, "env", key), names)
        return Case(
            name=name,
            prompts=prompts,
            attachments=tuple(self.file(a, (*where, "attachments")) for a in attachments),
            env=env,
            skip_if=skip_if,
            exclude=self.entries(table.get("exclude", []), (*where, "exclude")),
            permissions=permissions,
            set_config=self.string_map(table.get("set_config", {}), (*where, "set_config")),
            expect=self.expect(table.get("expect", {}), (*where, "expect"), names),
            budget=self.budget(table.get("budget", {}), (*where, "budget")),
        )

    def expect(self, raw: Any, where: KeyPath, names: set[str]) -> Expect:
        table = self.table(raw, where, _EXPECT)
        at: Callable[[str], KeyPath] = lambda key: (*where, key)  # noqa: E731
        for key in ("contains", "not_contains"):
            for text in self.strings(table.get(key, []), at(key)):
                self.placeholders(text, at(key), names)
        patterns = []
        for text in self.strings(table.get("regex", []), at("regex")):
            try:
                patterns.append(re.compile(text))
            except re.error as exc:
                raise self.fail(at("regex"), f"expect.regex {text!r}: {exc}") from None
        schema_path = schema = None
        if "json_schema" in table:
            schema_path = self.file(table["json_schema"], at("json_schema"))
            schema = self.schema(schema_path, at("json_schema"))
        stop = table.get("stop_reason")
        if stop is not None and stop not in (closed_set("stop_reason") or ()):
            raise self.fail(
                at("stop_reason"),
                f"expect.stop_reason must be one of {', '.join(closed_set('stop_reason') or ())}, "
                f"not {_describe(stop)}",
            )
        return Expect(
            contains=self.strings(table.get("contains", []), at("contains")),
            not_contains=self.strings(table.get("not_contains", []), at("not_contains")),
            regex=tuple(patterns),
            json_schema=schema_path,
            schema=schema,
            stop_reason=stop,
            tool_kinds=self.strings(table.get("tool_kinds", []), at("tool_kinds")),
            tool_attempts=self.strings(table.get("tool_attempts", []), at("tool_attempts")),
            no_tools=self.typed(table.get("no_tools", False), at("no_tools"), bool, "a boolean"),
            not_tool_kinds=self.strings(table.get("not_tool_kinds", []), at("not_tool_kinds")),
            files=self.string_map(table.get("files", {}), at("files")),
            files_absent=self.strings(table.get("files_absent", []), at("files_absent")),
            max_seconds=(
                self.positive(table["max_seconds"], at("max_seconds"), float)
                if "max_seconds" in table
                else None
            ),
            max_tokens=(
                self.positive(table["max_tokens"], at("max_tokens"), int)
                if "max_tokens" in table
                else None
            ),
            images=self.positive(table["images"], at("images"), int) if "images" in table else None,
            error=self.typed(table["error"], at("error"), str, "a string")
            if "error" in table
            else None,
            listed=self.typed(table.get("listed", False), at("listed"), bool, "a boolean"),
        )

    def schema(self, path: Path, where: KeyPath) -> Any:
        try:
            import jsonschema  # type: ignore[import-untyped]  # noqa: PLC0415 - optional
        except ImportError:
            raise self.fail(
                where,
                "expect.json_schema needs the jsonschema package: "
                "pip install 'agybridge[smoke]' (or jsonschema)",
            ) from None
        try:
            schema = json.loads(path.read_text(encoding="utf-8"))
            jsonschema.validators.validator_for(schema).check_schema(schema)
        except (OSError, ValueError) as exc:
            raise self.fail(where, f"{path} is not a JSON file: {exc}") from None
        except jsonschema.SchemaError as exc:
            raise self.fail(where, f"{path} is not a valid JSON schema: {exc.message}") from None
        return schema

    def budget(self, raw: Any, where: KeyPath) -> Budget:
        table = self.table(raw, where, _BUDGET)
        return Budget(
            max_tokens=(
                self.positive(table["max_tokens"], (*where, "max_tokens"), int)
                if "max_tokens" in table
                else None
            ),
            max_seconds=(
                self.positive(table["max_seconds"], (*where, "max_seconds"), float)
                if "max_seconds" in table
                else None
            ),
        )
