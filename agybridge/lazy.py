"""Package faces that import a module when one of its names is first used (PEP 562).

The bridge answers ``initialize`` before it needs sessions, agy, the store or
the permission gate (a cold start should cost little more than importing the
dependencies), yet ``from ..session.config import X`` runs ``session/__init__``
first. So the lower packages' ``__init__`` name their public face twice: under
``TYPE_CHECKING`` (what mypy and readers see) and in the table handed to
`exports`, which loads a name's module on first lookup.
tests/test_lazy_faces.py checks that both lists agree. Standard library only.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def exports(face: str, table: Mapping[str, Sequence[str]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for the module ``face`` (a package's ``__init__``
    or a plain module): ``table`` maps a module relative to the package
    (``".deps"``) to the names it provides. A name found is cached on ``face``,
    so each is looked up once; an unknown name is the usual ``AttributeError``."""
    where = {name: module for module, names in table.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {face!r} has no attribute {name!r}")
        own = sys.modules[face]
        package = face if hasattr(own, "__path__") else face.rpartition(".")[0]
        # __import__, not importlib.import_module: the latter bypasses the C
        # import path, so -X importtime (the benchmark, the cold-start test)
        # would not see the module.
        value = getattr(__import__(package + module, fromlist=(name,)), name)
        setattr(own, name, value)
        return value

    return __getattr__
