"""Sign-in through the editor: ACP auth methods, ``authenticate``, and what
the bridge knows about agy's sign-in.

ACP (authentication.mdx, schema ``AuthMethod``): an ``agent`` method is
answered by ``authenticate`` — here it checks that agy is signed in now and
answers -32000 with instructions if not. A ``terminal`` method (only when the
client sets ``clientCapabilities.auth.terminal``) makes the client run our own
command plus ``args`` in a terminal: ``agybridge login`` runs agy's sign-in and
exits 0 once signed in; the client never sends it to ``authenticate``.

The bridge learns that agy is signed out from a failed turn, the gate's
``agy -p /hooks`` check, discovery, or a probe; it never probes while it has
no reason to think so, so ``session/new`` costs no extra agy process in the
common case. Once signed out is known, ``session/new`` probes again (the user
may have signed in meanwhile) and answers -32000 while it stays signed out.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import trio

# Through the lazy face: agy's sign-in probe, its process tree and the stderr
# classifier load on first use, not before initialize is answered (issue 15).
from .. import agy
from ..jsonrpc import ErrorCode, RpcError
from ..session.errors import AuthRequiredError, auth_required

logger = logging.getLogger(__name__)

#: The ``agent`` method: "I have signed in; check it".
AGENT_METHOD_ID = "agy-signed-in"
#: The ``terminal`` method: the client runs ``agybridge login``.
TERMINAL_METHOD_ID = "agy-login"
#: A probe starts agy without a model turn (contract.md §6: ~6 s healthy).
PROBE_TIMEOUT_S = 60.0

Probe = Callable[[str], Awaitable["agy.ProbeResult"]]


def auth_methods(*, terminal: bool) -> list[dict[str, Any]]:
    """The methods ``initialize`` advertises (terminal only when the client can)."""
    methods: list[dict[str, Any]] = []
    if terminal:
        methods.append(
            {
                "type": "terminal",
                "id": TERMINAL_METHOD_ID,
                "name": "Sign in to Antigravity",
                "description": "Runs `agybridge login` in a terminal: agy's own sign-in.",
                "args": ["login"],
            }
        )
    methods.append(
        {
            "id": AGENT_METHOD_ID,
            "name": "I have signed in to agy",
            "description": "Sign in by running `agybridge login` (or `agy`) in a terminal, "
            "then choose this to continue.",
        }
    )
    return methods


def check_method(method_id: str, *, terminal: bool) -> None:
    """``authenticate``'s ``methodId`` must be our advertised agent method.

    Raises:
        RpcError: -32602 naming what is accepted.
    """
    if method_id == AGENT_METHOD_ID:
        return
    if method_id == TERMINAL_METHOD_ID and terminal:
        message = (
            f"{method_id!r} is a terminal method: the client runs `agybridge login` itself "
            f"and must not send it to authenticate (use {AGENT_METHOD_ID!r})"
        )
    else:
        message = f"unknown auth method {method_id!r}; this agent offers {AGENT_METHOD_ID!r}"
    raise RpcError(ErrorCode.INVALID_PARAMS, message, {"methodId": method_id})


async def _probe_sign_in(agy_bin: str) -> agy.ProbeResult:
    return await agy.probe_sign_in(agy_bin)


class SignInState:
    """What the bridge knows about agy's sign-in; see the module docstring."""

    def __init__(self, agy_bin: str, probe: Probe = _probe_sign_in) -> None:
        self._agy_bin = agy_bin
        self._probe = probe
        self.last: agy.ProbeResult | None = None

    def note_signed_out(self, detail: str) -> None:
        if self.last is None or self.last.state is not agy.SignIn.SIGNED_OUT:
            logger.info("agy is signed out: %s", detail)
        self.last = agy.ProbeResult(agy.SignIn.SIGNED_OUT, detail)

    def note_discovery_error(self, error: str | None) -> None:
        """``agy models`` failed: signed out if its words say so."""
        if error and agy.classify_stderr(error).kind is agy.StderrKind.AUTH:
            self.note_signed_out(error)

    async def check(self) -> agy.ProbeResult:
        """Probe agy now (bounded by :data:`PROBE_TIMEOUT_S`) and remember it."""
        result = agy.ProbeResult(agy.SignIn.UNKNOWN, f"no answer within {PROBE_TIMEOUT_S:.0f} s")
        with trio.move_on_after(PROBE_TIMEOUT_S):
            result = await self._probe(self._agy_bin)
        if result.state is not agy.SignIn.UNKNOWN or self.last is None:
            self.last = result
        logger.info("agy sign-in check: %s (%s)", result.state.value, result.detail)
        return result

    async def require(self) -> None:
        """Before ``session/new``: raise if agy is known to be signed out and
        still is (probed again, so signing in meanwhile is noticed)."""
        if self.last is None or self.last.state is not agy.SignIn.SIGNED_OUT:
            return
        result = await self.check()
        if result.state is agy.SignIn.SIGNED_OUT:
            raise auth_required(result.detail)

    async def authenticate(self) -> None:
        """The agent method: succeed only when agy is signed in now.

        Raises:
            AuthRequiredError: signed out, or agy could not tell.
        """
        result = await self.check()
        if result.state is agy.SignIn.SIGNED_IN:
            return
        if result.state is agy.SignIn.SIGNED_OUT:
            raise auth_required(result.detail)
        raise AuthRequiredError(
            f"could not confirm that agy is signed in ({result.detail}); run "
            "`agybridge doctor` in a terminal",
            data={"details": result.detail},
        )
