"""Where agy keeps a conversation's own files (contract.md §7).

Real agy writes everything of a conversation below ``~/.gemini/antigravity-cli``:
the SQLite conversation ``conversations/<id>.db`` and the folder
``brain/<id>/`` (transcripts, plans, generated images: hooks-and-tools.md §B2,
the hook payload's ``artifactDirectoryPath``). agy finds its home the Go way
(``$HOME``), and the bridge's agy children inherit the bridge's ``HOME``.
Pure: paths are built, never read.
"""

from __future__ import annotations

import os
import re

#: Below ``$HOME``: agy's state root.
STATE_PARTS = (".gemini", "antigravity-cli")
#: A conversation id agy could have written as a folder name: no separators,
#: no leading dot (so never ``.`` or ``..``). agy prints UUIDs.
_CONVERSATION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def state_root(home: str | None = None) -> str | None:
    """agy's state root for ``home`` (default ``$HOME``); None without a home."""
    home = home if home is not None else os.environ.get("HOME")
    if not home or not os.path.isabs(home):
        return None
    return os.path.join(home, *STATE_PARTS)


def brain_root(home: str | None = None) -> str | None:
    """The folder holding every conversation's ``brain/<id>/`` folder."""
    root = state_root(home)
    return None if root is None else os.path.join(root, "brain")


def conversation_folder(conversation_id: str | None, home: str | None = None) -> str | None:
    """``brain/<id>/`` of one conversation; None for no id or one that is not a
    plain folder name (it would name another folder)."""
    brain = brain_root(home)
    if brain is None or not conversation_id or not _CONVERSATION_ID.fullmatch(conversation_id):
        return None
    return os.path.join(brain, conversation_id)
