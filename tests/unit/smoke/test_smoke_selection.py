"""Issue 29, problems 5, 8 and 10: load-time checks, macOS, pytest's selection habits,
include/exclude and variables, and the published JSON Schemas."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import jsonschema
import pytest

from agybridge import procfs
from agybridge.session import config as session_config
from agybridge.smoke import processes, schemas
from agybridge.smoke.matrix import MatrixError, load_matrix
from agybridge.smoke.selection import SelectionError, keyword, last_failed, record_failed

REPO = Path(__file__).resolve().parents[3]
IDS = [
    "one-word [mode=safe, model=x]",
    "one-word [mode=ask, model=x]",
    "tool [mode=safe, model=y]",
    "slow tool [mode=ask, model=y]",
]


@pytest.mark.parametrize(
    ("expression", "picked"),
    [
        ("tool", [2, 3]),
        ("TOOL and not slow", [2]),
        ("mode=ask or model=y", [1, 2, 3]),
        ("not (one-word or slow)", [2]),
        ("one-word and (mode=safe or model=y)", [0]),
    ],
)
def test_k_expressions_select_like_pytest(expression: str, picked: list[int]) -> None:
    matches = keyword(expression)
    assert [i for i, cell in enumerate(IDS) if matches(cell)] == picked


@pytest.mark.parametrize("expression", ["", "a and", "(a", "a b", "or a", "a )"])
def test_bad_k_expressions_are_refused(expression: str) -> None:
    with pytest.raises(SelectionError, match="-k"):
        keyword(expression)


def test_last_failed_is_kept_per_matrix(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    one, two = tmp_path / "one.toml", tmp_path / "two.toml"
    assert last_failed(cache, one) == set()
    record_failed(cache, one, ["a [default]"])
    record_failed(cache, two, ["b [default]", "c [default]"])
    assert last_failed(cache, one) == {"a [default]"}
    assert last_failed(cache, two) == {"b [default]", "c [default]"}
    (cache / "lastfailed.json").write_text("not json")
    assert last_failed(cache, one) == set()


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "m.toml"
    path.write_text(text)
    return path


def test_include_exclude_and_variables(tmp_path: Path) -> None:
    matrix = load_matrix(
        write(
            tmp_path,
            """\
            [vars]
            greeting = "hello"

            [matrix]
            mode = ["safe", "ask"]
            lang = ["en", "fr"]
            exclude = [{ mode = "ask", lang = "fr" }]
            include = [
                { mode = "safe", lang = "en", effort = "high" },
                { mode = "plan", lang = "de" },
            ]

            [[case]]
            name = "greet"
            prompt = "Say {{greeting}} in {{lang}}."
            env = { LANG_UNDER_TEST = "{{lang}}" }
            exclude = [{ lang = "de" }]
            expect.contains = "{{greeting}}"
            """.replace("            ", ""),
        )
    )
    cells = matrix.cells()
    assert [c.id for c in cells] == [
        "greet [effort=high, lang=en, mode=safe]",
        "greet [lang=fr, mode=safe]",
        "greet [lang=en, mode=ask]",
    ]
    first = cells[0]
    assert first.prompts == ("Say hello in en.",)
    assert first.env == {"LANG_UNDER_TEST": "en"}
    # Custom axes fill placeholders only; known axes become session settings.
    assert first.session_meta() == {"mode": "safe", "effort": "high"}
    repeated = matrix.cells(repeat=2)
    assert [c.id for c in repeated[:2]] == [
        "greet [effort=high, lang=en, mode=safe] #1",
        "greet [effort=high, lang=en, mode=safe] #2",
    ]
    assert {c.key for c in repeated[:2]} == {first.key}


def test_skip_if_still_works_with_a_deprecation_warning(tmp_path: Path) -> None:
    matrix = load_matrix(
        write(
            tmp_path,
            '[matrix]\nmode = ["safe", "ask"]\n[[case]]\nname = "a"\nprompt = "p"\n'
            'skip_if = "mode == ask"\n',
        )
    )
    (warning,) = matrix.warnings
    assert warning.startswith(f"{tmp_path / 'm.toml'}:6: skip_if is deprecated")
    assert "exclude = [{ AXIS = VALUE, ... }]" in warning
    skip_if = matrix.cases[0].skip_if
    assert skip_if is not None and skip_if.holds({"mode": "ask"})


def test_closed_sets_match_the_bridge() -> None:
    """The schema is the runner's list of modes and efforts; it must be the bridge's."""
    assert schemas.closed_set("mode") == ("default", *session_config.MODES)
    efforts = schemas.closed_set("effort")
    assert efforts is not None and set(session_config.EFFORTS) <= set(efforts)
    assert schemas.closed_set("model") is None


def test_a_bad_mode_fails_at_load_time(tmp_path: Path) -> None:
    """Problem 5: known at load time, so exit 2 before anything runs (not exit 1 later)."""
    with pytest.raises(MatrixError) as caught:
        load_matrix(
            write(tmp_path, '[matrix]\nmode = ["Safe", "yolo"]\n[[case]]\nname="a"\nprompt="p"\n')
        )
    assert str(caught.value) == (
        f"{tmp_path / 'm.toml'}:2: matrix.mode[1]: 'yolo' is not a valid mode "
        "(one of: default, ask, accept-edits, plan, safe, autonomous, autonomous-unsandboxed)"
    )


@pytest.mark.parametrize("example", sorted((REPO / "examples" / "smoke").glob("*.toml")))
def test_examples_validate_against_the_published_matrix_schema(example: Path) -> None:
    data = tomllib.loads(example.read_text())
    jsonschema.validate(data, schemas.load("matrix"))
    load_matrix(example)


def test_the_schema_refuses_what_the_reader_refuses() -> None:
    schema = schemas.load("matrix")
    for bad in (
        {"case": [{"name": "a", "prompt": "p", "expect": {"contans": "x"}}]},
        {"matrix": {"mode": ["yolo"]}, "case": [{"name": "a", "prompt": "p"}]},
        {"case": [{"name": "a", "prompt": "p", "prompts": ["q"]}]},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    assert (REPO / "docs" / "smoke-matrix.schema.json").resolve() == (
        REPO / "agybridge" / "smoke" / "schema" / "matrix.schema.json"
    )


def test_without_proc_the_runner_finds_nothing_instead_of_crashing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Problem 8 (macOS): no /proc means no process look-ups, not a FileNotFoundError."""
    monkeypatch.setattr(procfs, "HAVE_PROC", False)

    def no_proc(*args: object, **kwargs: object) -> None:
        raise FileNotFoundError("/proc")

    monkeypatch.setattr(os, "scandir", no_proc)
    monkeypatch.setattr(os, "listdir", no_proc)
    assert processes.marked("AGYBRIDGE_SMOKE_CELL", "x") == []
    assert procfs.descendants(1) == []
