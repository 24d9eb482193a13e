"""Why a turn or session operation failed, as the session reports it.

Translated once, to JSON-RPC codes, by the agent (style.md §7).
"""

from __future__ import annotations


class SessionError(Exception):
    """A turn or session operation failed in a way the client must hear about."""

    def __init__(self, message: str, *, data: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data or {}


class AgyStartError(SessionError):
    """agy could not be started."""


class AgyExitedError(SessionError):
    """agy exited during a turn without finishing it."""


class AuthRequiredError(SessionError):
    """agy is not signed in."""


class InvalidModelError(SessionError):
    """agy rejected the configured model."""


def classify_agy_error(text: str, *, auth_failed: bool = False) -> SessionError | None:
    """The client-actionable error an agy error text is, if any (contract.md §4)."""
    if text.startswith("invalid model selection"):
        # notices (datetime, regexes) loads with the first such error, not before
        # initialize is answered (issue 15).
        from ..translate.notices import available_models  # noqa: PLC0415

        models_known = available_models(text)
        message = text.split("\n", 1)[0]
        if models_known:
            message += "; available models: " + ", ".join(models_known)
        return InvalidModelError(message, data={"details": text, "availableModels": models_known})
    if auth_failed or "not logged into antigravity" in text.lower():
        return auth_required(text)
    return None


#: What to do about it: the editor's sign-in action runs ``agybridge login``.
AUTH_REQUIRED_MESSAGE = (
    "agy is not signed in: sign in with your editor's login action, or run "
    "`agybridge login` (or `agy`) in a terminal, then retry"
)


def auth_required(details: str) -> AuthRequiredError:
    """The -32000 error for a signed-out agy; ``details`` = agy's own words."""
    return AuthRequiredError(AUTH_REQUIRED_MESSAGE, data={"details": details})


class InternalSessionError(SessionError):
    """The bridge itself failed while serving a turn (a bug): -32603."""


def internal_error(exc: Exception) -> InternalSessionError:
    """The client-facing error for a bug ``exc`` hit while serving."""
    return InternalSessionError(
        f"internal error in agybridge: {type(exc).__name__}: {exc}",
        data={"exception": type(exc).__name__},
    )
