"""The ACP registry entry (registry/agybridge/agent.json) and the package metadata."""

from __future__ import annotations

import json
import tomllib

import jsonschema

from agybridge import __version__
from agybridge.agent.auth import auth_methods

from ...conftest import DATA_DIR, REPO

ENTRY = REPO / "registry" / "agybridge"
SCHEMA = DATA_DIR / "registry" / "agent.schema.json"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def test_agent_json_is_valid() -> None:
    """Valid against the registry's schema, with its icon beside it."""
    entry = json.loads((ENTRY / "agent.json").read_text())
    jsonschema.Draft7Validator(json.loads(SCHEMA.read_text())).validate(entry)
    assert entry["id"] == "agybridge"
    assert (ENTRY / "icon.svg").read_text().startswith('<svg xmlns="http://www.w3.org/2000/svg"')


def test_agent_json_matches_the_package() -> None:
    """uvx runs the `agybridge` command of this very version; the license agrees."""
    entry = json.loads((ENTRY / "agent.json").read_text())
    assert entry["version"] == __version__ == PYPROJECT["version"]
    assert entry["distribution"]["uvx"]["package"] == f"{PYPROJECT['name']}=={__version__}"
    # `uvx <package>` runs the console script named like the package.
    assert PYPROJECT["name"] in PYPROJECT["scripts"]
    assert entry["license"] == PYPROJECT["license"]


def test_registry_auth_requirement() -> None:
    """The registry lists agents with agent or terminal auth: we always offer one."""
    assert [m.get("type", "agent") for m in auth_methods(terminal=False)] == ["agent"]
    assert {m.get("type", "agent") for m in auth_methods(terminal=True)} == {"agent", "terminal"}


def test_package_ships_only_the_bridge_command() -> None:
    """One console script (no fake-agy on PATH); an MIT LICENSE file ships."""
    assert PYPROJECT["scripts"] == {"agybridge": "agybridge.__main__:main"}
    assert "MIT License" in (REPO / "LICENSE").read_text()
    assert PYPROJECT["license-files"] == ["LICENSE"]


def test_registry_entry_warns_about_the_terms_of_use() -> None:
    """Registry users read only the description: it carries the README's warning."""
    description = json.loads((ENTRY / "agent.json").read_text())["description"]
    assert "not affiliated with Google" in description
    assert "suspend an account" in description
    assert "### Terms of use" in (REPO / "README.md").read_text()
