"""What ``initialize`` advertises (advertised.py, loaded without the sessions)
is the route table's extension rows (routes.py); mypy checks that each row's
params model is what its handler takes."""

from __future__ import annotations

from agybridge.agent.advertised import extension_capabilities
from agybridge.agent.routes import ROUTES

STEER = "_agybridge/session/steer"


def test_capabilities_list_every_extension_with_its_version() -> None:
    extensions = extension_capabilities()["extensions"]
    routed = [method for method in ROUTES if method.startswith("_agybridge/")]
    assert list(extensions) == routed
    assert extensions == {name: {"version": 1} for name in routed}
    assert list(extensions)[-1] == STEER  # the agent's own, listed last as before
