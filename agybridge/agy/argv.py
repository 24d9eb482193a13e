"""Build agy's argv for one persistent stream-json child (pure).

Why each fixed flag is there (contract.md §0, §1, §8):
- ``--input-format stream-json --output-format stream-json`` with no ``-p``:
  the documented stream mode; a ``-p`` value is dropped or, on some versions,
  swallows the next flag.
- ``--print-timeout 0``: versions up to 1.2.5 cut turns after 5 minutes.
- ``--add-dir <cwd>`` first: the process cwd alone is not a workspace root;
  without it agy works in its scratch directory.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class LaunchSpec:
    """Everything that decides one agy launch; a change needs a respawn."""

    cwd: str
    additional_dirs: tuple[str, ...] = ()
    conversation_id: str | None = None
    model: str | None = None
    effort: str | None = None
    mode: str | None = None
    agent: str | None = None
    print_timeout: str = "0"
    extra_args: tuple[str, ...] = ()


def build_argv(agy_bin: str, spec: LaunchSpec) -> list[str]:
    """The full argv (binary first) for ``spec``."""
    argv = [
        agy_bin,
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--print-timeout",
        spec.print_timeout or "0",
        "--add-dir",
        spec.cwd,
    ]
    # Each root once: a session moved into one of its additional directories
    # (set_workspace), or a client that lists the cwd again, names it twice.
    for directory in dict.fromkeys(spec.additional_dirs):
        if directory != spec.cwd:
            argv += ["--add-dir", directory]
    # Go's flag package would read "--model=-x" fine but "--model -x" as a flag:
    # the "=" form keeps user-provided values from ever being taken for flags.
    if spec.conversation_id:
        # A UUID learned from agy itself: never flag-like.
        argv += ["--conversation", spec.conversation_id]
    for flag, value in (
        ("--model", spec.model),
        ("--effort", spec.effort),
        ("--mode", spec.mode),
        ("--agent", spec.agent),
    ):
        if value:
            argv.append(f"{flag}={value}")
    argv += spec.extra_args
    return argv
