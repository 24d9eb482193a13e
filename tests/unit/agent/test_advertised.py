"""What ``initialize`` advertises (advertised.py, loaded without the sessions)
is the route table's extension rows (routes.py); mypy checks that each row's
params model is what its handler takes."""

from __future__ import annotations

from typing import Any

import pytest

from agybridge.acp.notifications import NOTIFICATIONS
from agybridge.agent.advertised import extension_capabilities, wants_notifications
from agybridge.agent.routes import ROUTES

STEER = "_agybridge/session/steer"


def test_capabilities_list_every_extension_with_its_version() -> None:
    extensions = extension_capabilities()["extensions"]
    routed = [method for method in ROUTES if method.startswith("_agybridge/")]
    assert list(extensions) == routed
    assert extensions == {name: {"version": 1} for name in routed}
    assert list(extensions)[-1] == STEER  # the agent's own, listed last as before


@pytest.mark.parametrize(
    ("meta", "asked"),
    [
        ({"agybridge": {"notifications": True}}, True),
        (None, False),
        ({}, False),
        ({"agybridge": True}, False),
        ({"agybridge": {"notifications": "true"}}, False),
        ({"agybridge": {"notifications": ["_agybridge/warning"]}}, False),
        ({"notifications": True}, False),
    ],
)
def test_only_true_under_agybridge_asks_for_the_notifications(meta: Any, asked: bool) -> None:
    """Anything but ``_meta.agybridge.notifications: true`` asks for nothing (and is
    no error); only a client that asked sees them listed."""
    assert wants_notifications(meta) is asked
    listed = extension_capabilities(notifications=asked)["notifications"]
    assert listed == (list(NOTIFICATIONS) if asked else [])
