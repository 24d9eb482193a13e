"""The per-session runtime directory: the hook root agy loads and the broker's socket.

Layout (hooks-and-tools.md §A8, §A10)::

    <base>/agyb-XXXXXXXX/          0700, ours: the bridge's runtime dir
        owner                      0400: the bridge's pid and start time (procfs)
        s.sock                     the broker's socket (0600, made by the broker)
        hook/                      passed to agy with --add-dir; read-only (0500)
            .agents/               0500
                hooks.json         0400: one PreToolUse hook, matcher "*"

``<base>`` is ``$XDG_RUNTIME_DIR`` when it is a private directory of ours, else the temp
dir, else ``/tmp``, whichever first keeps the socket path short enough for ``sun_path``
(108 bytes on Linux, 104 on macOS; we stay below 100). agy scans ``--add-dir`` roots
for ``.agents/hooks.json`` without trust checks (§A2); the file must be strict JSON with
an integer ``timeout`` or agy drops it silently (§A1), so it is written with ``json``
and read back before use. The model sees every ``--add-dir`` root, hence the read-only
modes and the policy's tamper rule (policy.py); the modes do not stop a process of the
same user that chmods first, they only keep honest tools from writing there.

A bridge that dies without cleaning up leaves its runtime dirs behind: its watchdog
removes them, and so does the next bridge's start (`remove_orphaned_roots`), by the
``owner`` file.

Nothing here is async: creating and removing a few small files is cheap and
`HookRoot.remove` must be callable from cleanup code that must not checkpoint.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import stat
import sys
import tempfile
from collections.abc import Mapping, Sequence

import attrs

from .. import procfs
from . import hook

HOOK_NAME = "agybridge-gate"
DIR_PREFIX = "agyb-"
SOCKET_NAME = "s.sock"
HOOK_DIR_NAME = "hook"
MAX_SOCKET_PATH_BYTES = 100  # sun_path is 108 bytes on Linux, 104 on macOS
DEFAULT_HOOK_TIMEOUT_S = 600  # hooks.json "timeout" (§A5: KG 600, kaoiro 3600)
#: The helper's reply timeout sits this far below the hooks.json timeout ...
HELPER_MARGIN_S = 10.0
#: ... and the broker's wait for the user this far below the helper's timeout.
WAIT_MARGIN_S = 20.0
TOKEN_BYTES = 32
#: The helper, run by path: stdlib only, no site-packages, no PYTHON* variables
#: (``-I -S``); the faster start of the measured choices (smoke/bench_hook.py).
HELPER_SCRIPT = os.path.abspath(hook.__file__)


class HookRootError(OSError):
    """The runtime directory could not be made private, or was tampered with."""


def helper_command() -> tuple[str, ...]:
    """argv of the hook helper: this interpreter running hook.py in isolated mode."""
    return (sys.executable, "-I", "-S", HELPER_SCRIPT)


@attrs.frozen
class HookRoot:
    """One session's runtime dir, hook root and credentials; see the module docstring.

    Attributes:
      runtime_dir: the private 0700 directory holding everything below.
      hook_dir: pass to agy as an extra ``--add-dir`` (and to ``agy -p /hooks``).
      hooks_json: the file agy loads; its exact bytes are kept in ``hooks_json_bytes``.
      socket_path: where the broker listens.
      token: 64 hex characters (32 random bytes) the helper sends with each request.
      hook_timeout_s: the hooks.json ``timeout``; agy kills the helper after it.
      helper_timeout_s: the helper's wait for the broker's reply (< hook_timeout_s).
    """

    runtime_dir: str
    hook_dir: str
    hooks_json: str
    hooks_json_bytes: bytes = attrs.field(repr=False)
    socket_path: str
    token: str = attrs.field(repr=False)
    hook_timeout_s: int
    helper_timeout_s: float

    @classmethod
    def create(
        cls,
        *,
        hook_timeout_s: int = DEFAULT_HOOK_TIMEOUT_S,
        helper_timeout_s: float | None = None,
        base_dir: str | None = None,
        command: Sequence[str] | None = None,
    ) -> HookRoot:
        """Make a fresh runtime dir with its hooks.json; the caller must `remove` it.

        Args:
          hook_timeout_s: the hooks.json ``timeout`` (integer seconds).
          helper_timeout_s: the helper's reply timeout; default ``hook_timeout_s - 10``.
          base_dir: where to create the runtime dir (default: see the module docstring).
          command: the helper's argv (default `helper_command`); shell-quoted into
            hooks.json because agy runs it with ``sh -c``.

        Raises:
          ValueError: timeouts out of order.
          HookRootError: no private directory with a short enough socket path.
        """
        if isinstance(hook_timeout_s, bool) or not isinstance(hook_timeout_s, int):
            raise ValueError(f"hook_timeout_s must be an int, not {hook_timeout_s!r}")
        if not 1 <= hook_timeout_s < 2**31:
            raise ValueError(f"hook_timeout_s must be in 1..2**31-1, not {hook_timeout_s!r}")
        if helper_timeout_s is None:
            helper_timeout_s = max(hook_timeout_s - HELPER_MARGIN_S, hook_timeout_s / 2)
        if not 0 < helper_timeout_s < hook_timeout_s:
            raise ValueError(
                f"helper_timeout_s must be above 0 and below hook_timeout_s "
                f"({hook_timeout_s}), not {helper_timeout_s!r}"
            )
        runtime_dir = _make_private_dir(base_dir)
        try:
            procfs.write_owner(runtime_dir)
            hook_dir = os.path.join(runtime_dir, HOOK_DIR_NAME)
            agents = os.path.join(hook_dir, ".agents")
            hooks_json = os.path.join(agents, "hooks.json")
            data = hooks_json_text(command or helper_command(), hook_timeout_s).encode()
            os.makedirs(agents, mode=0o700)
            fd = os.open(hooks_json, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.chmod(hooks_json, 0o400)
            os.chmod(agents, 0o500)
            os.chmod(hook_dir, 0o500)
            root = cls(
                runtime_dir=runtime_dir,
                hook_dir=hook_dir,
                hooks_json=hooks_json,
                hooks_json_bytes=data,
                socket_path=os.path.join(runtime_dir, SOCKET_NAME),
                token=secrets.token_hex(TOKEN_BYTES),
                hook_timeout_s=hook_timeout_s,
                helper_timeout_s=float(helper_timeout_s),
            )
            root.verify()
        except BaseException:
            _rmtree(runtime_dir)
            raise
        return root

    @property
    def env(self) -> dict[str, str]:
        """Variables to set on the agy child; its hooks inherit them (§A3)."""
        return {
            hook.ENV_SOCKET: self.socket_path,
            hook.ENV_TOKEN: self.token,
            hook.ENV_TIMEOUT: f"{self.helper_timeout_s:g}",
        }

    @property
    def max_wait_s(self) -> float:
        """The longest wait for the user that still beats the helper's timeout."""
        return max(self.helper_timeout_s - WAIT_MARGIN_S, self.helper_timeout_s * 0.75)

    @property
    def protected_paths(self) -> tuple[str, ...]:
        """Paths the model must not touch (for `Policy`), as given and resolved."""
        return tuple(dict.fromkeys([self.runtime_dir, os.path.realpath(self.runtime_dir)]))

    def verify(self) -> None:
        """Check modes, ownership and the hooks.json bytes; cheap, call it per turn.

        Raises:
          HookRootError: something changed (tamper) or is not private.
        """
        check_private_dir(self.runtime_dir)
        for path, mode in ((self.hook_dir, 0o500), (os.path.dirname(self.hooks_json), 0o500)):
            info = os.lstat(path)
            if not stat.S_ISDIR(info.st_mode) or stat.S_IMODE(info.st_mode) != mode:
                raise HookRootError(f"{path!r} is not a directory with mode {mode:o}")
        try:
            fd = os.open(self.hooks_json, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError as exc:
            raise HookRootError(f"cannot open {self.hooks_json!r}: {exc}") from exc
        with os.fdopen(fd, "rb") as src:
            info = os.fstat(src.fileno())
            content = src.read(len(self.hooks_json_bytes) + 1)
        if stat.S_IMODE(info.st_mode) != 0o400 or info.st_uid != os.geteuid():
            raise HookRootError(f"{self.hooks_json!r} lost its 0400 mode or owner")
        if content != self.hooks_json_bytes:
            raise HookRootError(f"{self.hooks_json!r} was modified")

    def remove(self) -> None:
        """Delete the runtime dir and everything in it; idempotent, never raises."""
        _rmtree(self.runtime_dir)


def hooks_json_text(command: Sequence[str], timeout_s: int) -> str:
    """The strict-JSON hooks.json declaring our one PreToolUse gate (§A1)."""
    handler = {"type": "command", "command": shlex.join(command), "timeout": int(timeout_s)}
    doc = {HOOK_NAME: {"enabled": True, "PreToolUse": [{"matcher": "*", "hooks": [handler]}]}}
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def runtime_bases() -> list[str]:
    """Where runtime dirs are made when no ``base_dir`` is given, in order."""
    return _base_dirs(None)


def remove_orphaned_roots(owner: str | None = None) -> list[str]:
    """Remove runtime dirs whose owner is ``owner`` (None: any bridge no longer
    running); returns the removed paths. Blocking; never raises."""
    return procfs.remove_owned_dirs(runtime_bases(), DIR_PREFIX, owner)


def _base_dirs(base_dir: str | None) -> list[str]:
    if base_dir is not None:
        return [base_dir]
    bases = []
    xdg = os.environ.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(xdg):
        try:
            check_private_dir(xdg)
            bases.append(xdg)
        except OSError:
            pass  # not ours or not private: fall back to mkdtemp's 0700 dir in /tmp
    bases += [tempfile.gettempdir(), "/tmp"]
    return list(dict.fromkeys(bases))


def _make_private_dir(base_dir: str | None) -> str:
    # mkdtemp adds 8 characters; measure the worst case before creating anything.
    tail = len(os.fsencode(os.path.join(DIR_PREFIX + "x" * 8, SOCKET_NAME))) + 1
    for base in _base_dirs(base_dir):
        if len(os.fsencode(os.path.abspath(base))) + tail < MAX_SOCKET_PATH_BYTES:
            path = tempfile.mkdtemp(prefix=DIR_PREFIX, dir=os.path.abspath(base))
            try:
                check_private_dir(path)
            except BaseException:
                _rmtree(path)
                raise
            return path
    raise HookRootError(
        f"no base directory keeps the socket path under {MAX_SOCKET_PATH_BYTES} bytes "
        f"(tried {_base_dirs(base_dir)!r}); set TMPDIR to a short path"
    )


def check_private_dir(path: str) -> None:
    """Raise `HookRootError` unless ``path`` is a real directory of ours, mode 0700.

    Raises:
      HookRootError: a symlink, another owner, or group/other permission bits.
      OSError: ``path`` cannot be examined.
    """
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise HookRootError(f"{path!r} is not a directory (or is a symlink)")
    if info.st_uid != os.geteuid():
        raise HookRootError(f"{path!r} is owned by uid {info.st_uid}, not by us")
    if stat.S_IMODE(info.st_mode) & 0o077:
        raise HookRootError(f"{path!r} has mode {stat.S_IMODE(info.st_mode):o}, not 0700")


def _rmtree(path: str) -> None:
    procfs.rmtree_private(path)


def child_env(
    root: HookRoot, base: Mapping[str, str] | None = None, *, observer: bool = False
) -> dict[str, str]:
    """``base`` (default: this process's environment) plus the hook variables;
    ``observer``: the hook only observes an ungated agy (its failures allow)."""
    env = dict(os.environ if base is None else base)
    env.update(root.env)
    env.pop(hook.ENV_OBSERVE, None)
    if observer:
        env[hook.ENV_OBSERVE] = "1"
    return env
