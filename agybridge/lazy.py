"""Package faces that import a module when one of its names is first used (PEP 562).

The bridge answers ``initialize`` before it needs sessions, agy, the store or
the permission gate (issue 15: spawn -> ``initialize`` near the dependency
import floor), yet ``from ..session.config import X`` runs ``session/__init__``
first. So the lower packages' ``__init__`` name their public face twice: under
``TYPE_CHECKING`` (what mypy and readers see) and in the table handed to
`exports`, which loads a name's module on first lookup.
tests/unit/test_lazy_faces.py checks that both lists agree. Standard library only.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def exports(package: str, table: Mapping[str, Sequence[str]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``table`` maps a relative module
    (``".deps"``) to the names it provides. A name found is cached on the package,
    so each is looked up once; an unknown name is the usual ``AttributeError``."""
    where = {name: module for module, names in table.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        # __import__, not importlib.import_module: the latter bypasses the C
        # import path, so -X importtime (the benchmark, the cold-start test)
        # would not see the module.
        value = getattr(__import__(package + module, fromlist=(name,)), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
