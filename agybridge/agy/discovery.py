"""What agy offers: ``agy models`` and ``agy agents`` (contract.md §6).

Both subcommands do a remote fetch with no client timeout and hung forever on
an inherited open stdin before 1.1.23, so they run with stdin from /dev/null
and under the caller's deadline. Output: one model per line,
``<slug><TAB><display name>`` (older builds: bare slugs, or space-aligned
columns), with progress and status lines to skip; one agent name per line.
"""

from __future__ import annotations

import logging
import re
import signal

import attrs

from .tree import run_owned

logger = logging.getLogger(__name__)

#: Status lines some agy builds print on stdout (contract.md §6, TZ-CLI).
_STATUS = re.compile(
    r"^(fetching\b|[IWEF]\d{4} |you are not logged into antigravity|failed to|error[ :]|"
    r"please sign in|warning:)",
    re.IGNORECASE,
)
_SLUG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$")


@attrs.frozen
class ModelInfo:
    slug: str
    name: str


class DiscoveryError(Exception):
    """``agy models``/``agy agents`` failed (signed out, missing binary...)."""


def parse_models(output: str) -> list[ModelInfo]:
    """Models from ``agy models`` stdout, in agy's order, without duplicates."""
    found: dict[str, ModelInfo] = {}
    for raw in output.splitlines():
        line = raw.strip()
        if not line or _STATUS.match(line):
            continue
        if "\t" in raw:
            slug, _, name = raw.strip().partition("\t")
        else:
            # Space-aligned columns or a bare slug.
            slug, _, name = line.partition(" ")
        slug, name = slug.strip(), name.strip()
        if not _SLUG.match(slug):
            continue
        found.setdefault(slug, ModelInfo(slug=slug, name=name or slug))
    return list(found.values())


def parse_agents(output: str) -> list[str]:
    """Agent names from ``agy agents`` stdout (first column), in order."""
    names: list[str] = []
    for raw in output.splitlines():
        line = raw.strip()
        if not line or _STATUS.match(line):
            continue
        name = re.split(r"[\t ]", line, maxsplit=1)[0]
        if _SLUG.match(name) and name not in names:
            names.append(name)
    return names


async def run_subcommand(agy_bin: str, subcommand: str) -> str:
    """stdout of ``agy <subcommand>`` (stdin closed, output captured).

    Raises:
        DiscoveryError: agy could not run or exited non-zero.
    Cancellation stops agy's whole tree with the escalation ladder
    (`run_owned`); wrap in a deadline.
    """
    try:
        done = await run_owned([agy_bin, subcommand], label=f"agy {subcommand}")
    except OSError as exc:
        raise DiscoveryError(f"could not run {agy_bin!r} {subcommand}: {exc}") from exc
    stderr = done.stderr.decode("utf-8", "replace").strip()
    if done.returncode != 0:
        code = done.returncode
        how = f"was killed by {_signal_name(-code)}" if code < 0 else f"exited with code {code}"
        last = f": {stderr.splitlines()[-1]}" if stderr else ""
        raise DiscoveryError(f"agy {subcommand} {how}{last}")
    return done.stdout.decode("utf-8", "replace")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


async def discover_models(agy_bin: str) -> list[ModelInfo]:
    return parse_models(await run_subcommand(agy_bin, "models"))


async def discover_agents(agy_bin: str) -> list[str]:
    return parse_agents(await run_subcommand(agy_bin, "agents"))
