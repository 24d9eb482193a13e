"""What ``initialize`` advertises (advertised.py, loaded without the sessions) is
exactly what the agent serves once the session methods are loaded."""

from __future__ import annotations

from typing import Any, cast

from agybridge.acp.limits import PromptLimits
from agybridge.agent.advertised import EXTENSION_METHODS, STEER, extension_capabilities
from agybridge.agent.extensions import Extensions
from agybridge.agent.handlers import SESSION_METHODS
from agybridge.agent.session_methods import SessionMethods
from agybridge.session.config import LaunchSettings

NOBODY = cast(Any, None)


def test_every_advertised_extension_is_served() -> None:
    served = set(Extensions(NOBODY).methods)
    assert served == set(EXTENSION_METHODS) - {STEER}


def test_the_session_methods_are_what_the_agent_routes() -> None:
    methods = SessionMethods(
        NOBODY,
        NOBODY,
        NOBODY,
        default_settings=LaunchSettings(),
        limits=PromptLimits(),
        doctor=list,
        catalog_ready=None,
        sign_in=NOBODY,
    )
    assert set(methods.methods) == {*SESSION_METHODS, STEER}


def test_capabilities_list_every_extension_with_its_version() -> None:
    extensions = extension_capabilities()["extensions"]
    assert extensions == {name: {"version": 1} for name in EXTENSION_METHODS}
    assert list(extensions)[-1] == STEER  # the agent's own, listed last as before
