"""The smoke matrix file: parsing, checking (errors name their line), conditions, cells."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agybridge.smoke import cli as smoke_cli
from agybridge.smoke.condition import ConditionError, parse_condition
from agybridge.smoke.lineindex import LineIndex
from agybridge.smoke.matrix import MatrixError, load_matrix

BASIC = """\
[run]
concurrency = 2
timeout_s = 30
retries = 1

[matrix]
mode = ["safe", "ask"]
model = ["default", "fast"]

[[case]]
name = "one-word"
prompt = "Reply PONG."
permissions = "deny"
expect.contains = "PONG"
expect.regex = ["^P.NG$"]
expect.stop_reason = "end_turn"
budget.max_seconds = 5

[[case]]
name = "memory"
prompts = ["Remember 4711.", "What number?"]
skip_if = "mode == safe and model != default"
env = { FAKE_AGY_SCENARIO = "echo" }

[case.expect]
contains = ["4711", "number"]
files = { "out.txt" = "done" }
max_tokens = 100
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "matrix.toml"
    path.write_text(textwrap.dedent(text))
    return path


def error_of(tmp_path: Path, text: str) -> MatrixError:
    with pytest.raises(MatrixError) as caught:
        load_matrix(write(tmp_path, text))
    return caught.value


def test_a_full_matrix_reads_into_cells(tmp_path: Path) -> None:
    matrix = load_matrix(write(tmp_path, BASIC))
    assert matrix.run.concurrency == 2 and matrix.run.timeout_s == 30.0
    assert matrix.run.retries == 1
    assert matrix.axes == {"mode": ("safe", "ask"), "model": ("default", "fast")}
    first, second = matrix.cases
    assert first.prompts == ("Reply PONG.",) and first.permissions == "deny"
    assert first.expect.contains == ("PONG",) and first.expect.stop_reason == "end_turn"
    assert first.budget.max_seconds == 5.0
    assert second.prompts == ("Remember 4711.", "What number?")
    assert second.expect.contains == ("4711", "number")
    assert second.expect.files == {"out.txt": "done"} and second.expect.max_tokens == 100
    assert second.env == {"FAKE_AGY_SCENARIO": "echo"}
    cells = matrix.cells()
    assert len(cells) == 8
    assert [c.index for c in cells] == list(range(8))
    assert cells[0].id == "one-word [mode=safe, model=default]"
    assert cells[1].session_meta() == {"mode": "safe", "model": "fast"}
    assert second.skip_if is not None
    skipped = [c.label for c in cells if c.case.skip_if and c.case.skip_if.holds(c.axes)]
    assert skipped == ["mode=safe, model=fast"]


def test_no_axes_gives_one_default_cell_per_case(tmp_path: Path) -> None:
    matrix = load_matrix(write(tmp_path, '[[case]]\nname = "a"\nprompt = "hi"\n'))
    (cell,) = matrix.cells()
    assert cell.label == "default" and cell.session_meta() == {}
    assert matrix.run.concurrency == 1 and matrix.run.retries == 0


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        (
            '[run]\nconcurency = 2\n[[case]]\nname="a"\nprompt="p"\n',
            2,
            "unknown key 'run.concurency'",
        ),
        ('[run]\nconcurrency = "4"\n[[case]]\nname="a"\nprompt="p"\n', 2, "must be an integer"),
        ("[run]\nconcurrency = true\n[[case]]\nname='a'\nprompt='p'\n", 2, "not a boolean"),
        ("[run]\nconcurrency = 0\n[[case]]\nname='a'\nprompt='p'\n", 2, "greater than 0"),
        ("[run]\ntimeout_s = -1\n[[case]]\nname='a'\nprompt='p'\n", 2, "greater than 0"),
        ("[run]\nretries = -1\n[[case]]\nname='a'\nprompt='p'\n", 2, "0 or more"),
        ("[run]\nworkspace = 'nope'\n[[case]]\nname='a'\nprompt='p'\n", 2, "no such directory"),
        ("[matrix]\nmode = 'safe'\n[[case]]\nname='a'\nprompt='p'\n", 2, "an array of strings"),
        # Closed sets are checked at load time (the bridge would refuse them per cell).
        (
            "[matrix]\nmode = ['ask', 'bogus']\n[[case]]\nname='a'\nprompt='p'\n",
            2,
            "'bogus' is not a valid mode",
        ),
        (
            "[matrix]\neffort = ['hi']\n[[case]]\nname='a'\nprompt='p'\n",
            2,
            "'hi' is not a valid effort",
        ),
        (
            "[matrix]\nmode = ['ask']\nexclude = [{ mode = 'nope' }]\n"
            "[[case]]\nname='a'\nprompt='p'\n",
            3,
            "'nope' is not a valid mode",
        ),
        ("[matrix]\n'bad axis' = ['x']\n[[case]]\nname='a'\nprompt='p'\n", 2, "an axis name"),
        ("[[case]]\nname='a'\nprompt='say {{colour}}'\n", 3, "{{colour}} is neither"),
        ("[matrix]\nmode = []\n[[case]]\nname='a'\nprompt='p'\n", 2, "is empty"),
        ("[matrix]\nmode = ['a', 'a']\n[[case]]\nname='a'\nprompt='p'\n", 2, "repeats"),
        (
            "[[case]]\nname = 'a'\nprompt = 'p'\nexpect.contans = 'x'\n",
            4,
            "'case[0].expect.contans'",
        ),
        (
            "[[case]]\nname='a'\nprompt='p'\n[[case]]\nname='b'\nprompt='p'\n"
            "budget = {max_tokns = 1}\n",
            7,
            "'case[1].budget.max_tokns'",
        ),
        (
            "[[case]]\nname='a'\nprompt='p'\n\n[case.expect]\nmax_seconds = 'soon'\n",
            6,
            "must be a number",
        ),
        ("[[case]]\nname='a'\nprompt='p'\npermissions = 'maybe'\n", 4, "allow, deny, fail"),
        ("[[case]]\nname='a'\nprompt='p'\nprompts=['q']\n", 1, "exactly one of prompt or prompts"),
        ("[[case]]\nname='a'\n", 1, "exactly one of prompt or prompts"),
        ("[[case]]\nprompt='p'\n", 1, "has no name"),
        ("[[case]]\nname='a'\nprompts=[]\n", 3, "prompts is empty"),
        ("[[case]]\nname='a'\nprompts=['x', 2]\n", 3, "an array of strings"),
        ("[[case]]\nname='a'\nprompt='p'\n[[case]]\nname='a'\nprompt='q'\n", 5, "used twice"),
        ("[[case]]\nname='a'\nprompt='p'\nenv = { X = 1 }\n", 4, "must be a string"),
        ("[[case]]\nname='a'\nprompt='p'\nskip_if = 'mode == safe'\n", 4, "not an axis"),
        ("[[case]]\nname='a'\nprompt='p'\nexpect.regex = '(['\n", 4, "expect.regex"),
        ("[[case]]\nname='a'\nprompt='p'\nexpect.stop_reason = 'done'\n", 4, "end_turn"),
        ("[[case]]\nname='a'\nprompt='p'\nset_config = { sandbox = true }\n", 4, "a string"),
        ("[[case]]\nname='a'\nprompt='p'\nexpect.images = 0\n", 4, "expect.images"),
        ("[[case]]\nname='a'\nprompt='p'\nexpect.error = 1\n", 4, "a string"),
        ("[[case]]\nname='a'\nprompt='p'\nexpect.listed = 'yes'\n", 4, "a boolean"),
        ("[[case]]\nname='a'\nprompt='p'\nattachments = ['missing.png']\n", 4, "no such file"),
        (
            "[[case]]\nname='a'\nprompt='p'\nexpect.json_schema = 'missing.json'\n",
            4,
            "no such file",
        ),
        ("[[case]]\nname='a'\nprompt='''\nkey = 1\n'''\nbogus = 2\n", 6, "'case[0].bogus'"),
        ("[runn]\n[[case]]\nname='a'\nprompt='p'\n", 1, "unknown key 'runn'"),
        ("case = 'x'\n", 1, "write [[case]]"),
        ("[run]\n", None, "no [[case]]"),
        ("case = []\n", 1, "no [[case]]"),
        ("[[case]\nname='a'\n", 1, "not valid TOML"),
    ],
)
def test_invalid_matrices_name_the_line(
    tmp_path: Path, text: str, line: int | None, words: str
) -> None:
    error = error_of(tmp_path, text)
    assert error.line == line, str(error)
    assert words in str(error)
    expected_prefix = f"{tmp_path / 'matrix.toml'}:{line}: " if line else str(tmp_path)
    assert str(error).startswith(expected_prefix)


def test_json_schema_files_are_checked(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text('{"type": 12}')
    (tmp_path / "good.json").write_text('{"type": "object", "required": ["answer"]}')
    (tmp_path / "junk.json").write_text("{not json")
    base = "[[case]]\nname='a'\nprompt='p'\nexpect.json_schema = '{}'\n"
    assert "not a valid JSON schema" in str(error_of(tmp_path, base.format("bad.json")))
    assert "not a JSON file" in str(error_of(tmp_path, base.format("junk.json")))
    matrix = load_matrix(write(tmp_path, base.format("good.json")))
    assert matrix.cases[0].expect.schema == {"type": "object", "required": ["answer"]}


def test_relative_paths_are_relative_to_the_matrix(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "notes.txt").write_text("x")
    matrix = load_matrix(
        write(
            tmp_path,
            "[run]\nworkspace = 'app'\n[[case]]\nname='a'\nprompt='p'\n"
            "attachments = 'app/notes.txt'\n",
        )
    )
    assert matrix.run.workspace == (tmp_path / "app").resolve()
    assert matrix.cases[0].attachments == ((tmp_path / "app" / "notes.txt").resolve(),)


def test_line_index_finds_tables_arrays_and_dotted_keys() -> None:
    index = LineIndex(
        '[run]\nx = 1\n[[case]]\nname = "a"\nexpect.contains = "b"\n'
        '[[case]]\n"quoted.key" = 2\n[case.expect]\nregex = "c"\n'
    )
    assert index.line(("run", "x")) == 2
    assert index.line(("case", 0, "expect", "contains")) == 5
    assert index.line(("case", 1, "quoted.key")) == 7
    assert index.line(("case", 1, "expect", "regex")) == 9
    assert index.line(("case", 1, "expect", "nope")) == 8
    assert index.line(("case", 0, "nope")) == 3
    assert index.line(("elsewhere",)) is None


AXES = {"mode": ("safe", "ask", "plan"), "model": ("default", "fast")}


@pytest.mark.parametrize(
    ("text", "axes", "holds"),
    [
        ("mode == safe", {"mode": "safe"}, True),
        ("mode == 'safe'", {"mode": "ask"}, False),
        ('mode != "safe"', {"mode": "ask"}, True),
        ("mode in [safe, plan]", {"mode": "plan"}, True),
        ("mode not in [safe, plan]", {"mode": "plan"}, False),
        ("mode == safe and model == fast", {"mode": "safe", "model": "default"}, False),
        ("mode == ask or mode == safe and model == fast", {"mode": "ask", "model": "x"}, True),
        ("mode == ask or mode == safe and model == fast", {"mode": "safe", "model": "x"}, False),
    ],
)
def test_conditions(text: str, axes: dict[str, str], holds: bool) -> None:
    assert parse_condition(text, AXES).holds(axes) is holds


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty"),
        ("mode", "ends too early"),
        ("mode = safe", "cannot read"),
        ("mode safe", "expected ==, !=, in"),
        ("mode == safe xor model == x", "expected 'and' or 'or'"),
        ("effort == high", "not an axis"),
        ("mode in [safe", "ends too early"),
        ("mode in [safe; ask]", "expected , or ]"),
        ("mode == and", "expected a value"),
    ],
)
def test_bad_conditions(text: str, words: str) -> None:
    with pytest.raises(ConditionError, match=words):
        parse_condition(text, AXES)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(sorted(AXES)), st.sampled_from(["==", "!="]), st.text("abc", min_size=1)
        ),
        min_size=1,
        max_size=4,
    ),
    st.sampled_from(["and", "or"]),
    st.fixed_dictionaries(
        {"mode": st.text("abc", min_size=1), "model": st.text("abc", min_size=1)}
    ),
)
def test_conditions_agree_with_python(
    tests: list[tuple[str, str, str]], joiner: str, axes: dict[str, str]
) -> None:
    """Any chain of tests joined by one operator means what Python says it means."""
    text = f" {joiner} ".join(f'{axis} {op} "{value}"' for axis, op, value in tests)
    results = [(axes[axis] == value) == (op == "==") for axis, op, value in tests]
    expected = all(results) if joiner == "and" else any(results)
    assert parse_condition(text, AXES).holds(axes) is expected


@pytest.mark.parametrize(
    ("bridge", "words"), [('agybridge "attach', "--bridge"), ("   ", "--bridge")]
)
def test_a_bridge_command_line_that_does_not_parse_is_invalid(
    tmp_path: Path, bridge: str, words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 2 and a message naming --bridge, before any cell runs (not a traceback)."""
    matrix = write(tmp_path, "[[case]]\nname='a'\nprompt='p'\n")
    assert smoke_cli.main(["run", str(matrix), "--bridge", bridge]) == smoke_cli.EXIT_INVALID
    out, err = capsys.readouterr()
    assert out == "" and words in err and "Traceback" not in err
