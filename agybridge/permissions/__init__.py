"""The permission gate: agy's PreToolUse hook -> broker -> the session's decision.

Pieces (hooks-and-tools.md §A8, §A10; issue 6):

* `HookRoot` - the private per-session runtime dir: ``hook/.agents/hooks.json`` (pass
  ``hook_dir`` to agy with ``--add-dir``), the socket path, the token, and the ``env``
  to set on the agy child.
* `Broker` - the trio server on that socket; awaits a ``decide(HookRequest) ->
  Decision`` callable per hook call, bounded by ``wait_s``; `Broker.deny_all_pending`
  for ``session/cancel``.
* `Policy` - pure rules first: reads inside the roots are allowed, ``accept-edits``
  allows edits inside the roots, anything touching the gate is denied, remembered
  "always" answers apply; else ASK (then the session asks the ACP client).
* ``hook.py`` - the stdlib-only helper agy runs (`helper_command`); it prints an
  explicit deny on every failure.

Deadlines nest: ``Broker(wait_s)`` < `HookRoot.helper_timeout_s` < `HookRoot.hook_timeout_s`
(the hooks.json ``timeout``); `HookRoot.max_wait_s` is a ``wait_s`` that fits.
"""

from typing import TYPE_CHECKING

from ..lazy import exports

if TYPE_CHECKING:
    from .broker import BAD_TOKEN_REASON as BAD_TOKEN_REASON
    from .broker import BUSY_REASON as BUSY_REASON
    from .broker import TIMEOUT_REASON as TIMEOUT_REASON
    from .broker import Broker as Broker
    from .broker import BrokerStatistics as BrokerStatistics
    from .broker import Decide as Decide
    from .commands import command_key as command_key
    from .commands import command_prefix as command_prefix
    from .hook import ENV_SOCKET as ENV_SOCKET
    from .hook import ENV_TIMEOUT as ENV_TIMEOUT
    from .hook import ENV_TOKEN as ENV_TOKEN
    from .hook_root import DIR_PREFIX as DIR_PREFIX
    from .hook_root import HOOK_NAME as HOOK_NAME
    from .hook_root import HookRoot as HookRoot
    from .hook_root import HookRootError as HookRootError
    from .hook_root import child_env as child_env
    from .hook_root import helper_command as helper_command
    from .hook_root import remove_orphaned_roots as remove_orphaned_roots
    from .hook_root import runtime_bases as runtime_bases
    from .models import Decision as Decision
    from .models import HookRequest as HookRequest
    from .models import PayloadError as PayloadError
    from .policy import MODES as MODES
    from .policy import Assessment as Assessment
    from .policy import Policy as Policy
    from .policy import Verdict as Verdict
    from .policy import memory_key as memory_key

# Loaded on first use (agybridge/lazy.py): the bridge answers initialize without them.
__getattr__ = exports(
    __name__,
    {
        ".broker": (
            "BAD_TOKEN_REASON",
            "BUSY_REASON",
            "TIMEOUT_REASON",
            "Broker",
            "BrokerStatistics",
            "Decide",
        ),
        ".commands": ("command_key", "command_prefix"),
        ".hook": ("ENV_SOCKET", "ENV_TIMEOUT", "ENV_TOKEN"),
        ".hook_root": (
            "DIR_PREFIX",
            "HOOK_NAME",
            "HookRoot",
            "HookRootError",
            "child_env",
            "helper_command",
            "remove_orphaned_roots",
            "runtime_bases",
        ),
        ".models": ("Decision", "HookRequest", "PayloadError"),
        ".policy": ("MODES", "Assessment", "Policy", "Verdict", "memory_key"),
    },
)
