"""Workspace skills (.agents/skills/*/SKILL.md) for available_commands_update."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agybridge.workspace.skills import (
    Skill,
    find_skills,
    parse_front_matter,
    parse_skill,
)


def skill_file(root: Path, folder: str, text: str | bytes, custom: str = ".agents") -> Path:
    directory = root / custom / "skills" / folder
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "SKILL.md"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


FRONT_MATTER = [
    ("plain", "---\nname: review\ndescription: Reviews code.\n---\nbody", {
        "name": "review", "description": "Reviews code."}),
    ("double quoted", '---\ndescription: "Say \\"hi\\": now"\n---\n', {
        "description": 'Say "hi": now'}),
    ("single quoted", "---\ndescription: 'it''s # fine'\n---\n", {
        "description": "it's # fine"}),
    ("comment", "---\nname: x # the name\n---\n", {"name": "x"}),
    ("folded block", "---\ndescription: >\n  one\n  two\n\n  three\nname: n\n---\n", {
        "description": "one two\nthree", "name": "n"}),
    ("literal block", "---\ndescription: |-\n  one\n  two\n---\n", {"description": "one\ntwo"}),
    ("plain continued", "---\ndescription: starts here\n  and goes on\n---\n", {
        "description": "starts here and goes on"}),
    ("quoted continued", '---\ndescription: "starts\n  goes on"\n---\n', {
        "description": "starts goes on"}),
    ("nested keys ignored", "---\nmeta:\n  name: inner\nname: outer\n---\n", {
        "meta": "name: inner", "name": "outer"}),
    ("bom and dots", "\ufeff---\nname: b\n...\n", {"name": "b"}),
    ("crlf", "---\r\nname: w\r\n---\r\n", {"name": "w"}),
    ("empty value", "---\nname:\ndescription: d\n---\n", {"name": "", "description": "d"}),
    ("unclosed", "---\nname: x\n", {}),
    ("no front matter", "# Title\nname: x\n", {}),
    ("empty", "", {}),
    ("garbage lines", "---\n: nope\n- item\nname: ok\n---\n", {"name": "ok"}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "fields"), [pytest.param(*row[1:], id=row[0]) for row in FRONT_MATTER]
)
def test_parse_front_matter(text: str, fields: dict[str, str]) -> None:
    """The flat key: value subset of YAML that skills use is read; anything else is ignored."""
    assert parse_front_matter(text) == fields


@pytest.mark.parametrize(
    ("text", "name", "description"),
    [
        ("---\nname: lint\ndescription: Run  the\n  linters.\n---\n", "lint", "Run the linters."),
        ("---\ndescription: No name given\n---\n", "folder", "No name given"),
        ("---\nname: has spaces\ndescription: d\n---\n", "folder", "d"),
        ("# Deploy the app\n\nSteps...", "folder", "Deploy the app"),
        ("---\nname: x\n---\n\n## Heading only\n", "x", "Heading only"),
        ("", "folder", "agy skill folder"),
        ("---\ndescription: " + "w" * 400 + "\n---\n", "folder", "w" * 299 + "…"),
    ],
)
def test_parse_skill(text: str, name: str, description: str) -> None:
    """Name falls back to the folder; description to the first body line, then a stock text."""
    assert parse_skill(text, "folder", "/p/SKILL.md") == Skill(name, description, "/p/SKILL.md")


def test_unusable_names_are_skipped() -> None:
    """A skill with neither a usable name nor a usable folder name is left out."""
    assert parse_skill("---\nname: a b\n---\n", "bad folder", "/p") is None


def test_find_skills_in_workspace_roots(tmp_path: Path) -> None:
    """Skills come from every root's customization directories; the first of a name wins."""
    cwd, extra = tmp_path / "cwd", tmp_path / "extra"
    review = skill_file(cwd, "review", "---\nname: review\ndescription: Review code.\n---\n")
    skill_file(cwd, "zeta", "---\ndescription: Last one.\n---\n")
    legacy = skill_file(cwd, "old", "---\ndescription: From .agent.\n---\n", custom=".agent")
    skill_file(cwd, "dup", "---\nname: review\ndescription: Shadowed.\n---\n", custom=".agent")
    other = skill_file(extra, "deploy", "---\nname: deploy\ndescription: Ship it.\n---\n")
    skill_file(extra, "review2", "---\nname: review\ndescription: Also shadowed.\n---\n")
    assert find_skills([str(cwd), str(extra)]) == [
        Skill("review", "Review code.", str(review)),
        Skill("zeta", "Last one.", str(cwd / ".agents" / "skills" / "zeta" / "SKILL.md")),
        Skill("old", "From .agent.", str(legacy)),
        Skill("deploy", "Ship it.", str(other)),
    ]


def test_find_skills_is_tolerant(tmp_path: Path) -> None:
    """Missing directories, folders without SKILL.md, files and binary junk never fail."""
    skills = tmp_path / ".agents" / "skills"
    (skills / "empty-folder").mkdir(parents=True)
    (skills / "a-file.md").write_text("not a folder")
    skill_file(tmp_path, "binary", b"\x00\xff\xfe---\nname: \x80\x81\n")
    skill_file(tmp_path, "latin", "---\ndescription: caf\xe9\n---\n".encode("latin-1"))
    skill_file(tmp_path, "huge", "---\nname: huge\ndescription: big\n---\n" + "x" * 200_000)
    found = find_skills([str(tmp_path), str(tmp_path / "missing")])
    assert [(skill.name, skill.description) for skill in found] == [
        ("binary", "\ufffd\ufffd---"),
        ("huge", "big"),
        ("latin", "caf\ufffd"),
    ]


def test_reserved_names_and_limit(tmp_path: Path) -> None:
    """The bridge's own command names are left out, and the list is bounded."""
    for name in ("model", "alpha", "beta", "gamma"):
        skill_file(tmp_path, name, f"---\nname: {name}\ndescription: d\n---\n")
    assert [s.name for s in find_skills([str(tmp_path)], reserved={"model"})] == [
        "alpha",
        "beta",
        "gamma",
    ]
    assert [s.name for s in find_skills([str(tmp_path)], limit=2)] == ["alpha", "beta"]


@given(st.text(max_size=300))
def test_parsing_never_fails(text: str) -> None:
    """Any text parses to a usable skill or to none, without an exception."""
    parse_front_matter(text)
    parse_front_matter("---\n" + text + "\n---\n")
    skill = parse_skill("---\n" + text, "folder", "/p")
    assert skill is not None
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}", skill.name)
    assert skill.description
    assert "\n" not in skill.description
