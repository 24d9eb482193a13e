"""``agybridge smoke``: run a matrix of prompts, modes and models through the bridge.

A client of the bridge, built only on the leaf packages (``jsonrpc``, ``media``,
``agy.stderr``): it starts ``agybridge`` (or ``--bridge CMD``) per cell and speaks ACP
to it exactly as an editor does. Modules: `matrix` (read and check the TOML file),
`model` (cases, axes, cells), `cell` (one attempt as an ACP client), `client` (the
handler), `causes` (classified errors, transient or not), `expectations`, `runner`
(concurrency, retries), `baseline`, `reports` (JUnit, JSON, Markdown), `progress`,
`processes` (process groups, the stop ladder), `cli`.
"""

from .cli import main as main
