"""What the session read from disk for one agy event, handed to the mapper
(which does no I/O): files for diffs, verified images, refused image paths."""

from __future__ import annotations

from collections.abc import Mapping

import attrs


@attrs.frozen
class ImageData:
    mime_type: str
    data: str  # base64


@attrs.frozen
class Observation:
    """What the session read from disk for one event (the mapper does no I/O).

    ``files`` maps an absolute path to its text (None: the file does not
    exist); ``images`` maps a path named in the output to a verified image;
    ``refused`` maps one the user is told about (another agy conversation's
    folder) to why it is not shown.
    """

    files: Mapping[str, str | None] = attrs.Factory(dict)
    images: Mapping[str, ImageData] = attrs.Factory(dict)
    refused: Mapping[str, str] = attrs.Factory(dict)


NO_OBSERVATION = Observation()
