"""Sessions: one nursery per ACP session, its sans-I/O turn core, the loop and
the ports that perform the core's actions."""

from typing import TYPE_CHECKING

from ..lazy import exports

if TYPE_CHECKING:
    from .deps import SessionDeps as SessionDeps
    from .deps import Timeouts as Timeouts
    from .errors import AgyExitedError as AgyExitedError
    from .errors import AgyStartError as AgyStartError
    from .errors import AuthRequiredError as AuthRequiredError
    from .errors import InvalidModelError as InvalidModelError
    from .errors import SessionError as SessionError
    from .manager import SessionManager as SessionManager
    from .prompts import PromptResult as PromptResult
    from .session import Session as Session
    from .spec import SessionSpec as SessionSpec

# Loaded on first use (agybridge/lazy.py): the bridge answers initialize without them.
__getattr__ = exports(
    __name__,
    {
        ".deps": ("SessionDeps", "Timeouts"),
        ".errors": (
            "AgyExitedError",
            "AgyStartError",
            "AuthRequiredError",
            "InvalidModelError",
            "SessionError",
        ),
        ".manager": ("SessionManager",),
        ".prompts": ("PromptResult",),
        ".session": ("Session",),
        ".spec": ("SessionSpec",),
    },
)
