"""``agybridge smoke``: run a matrix of prompts, modes and models through the bridge.

A client of the bridge, built only on the leaf packages (``jsonrpc``, ``media``,
``agy.stderr``): it starts ``agybridge`` (or ``--bridge CMD``) per cell and speaks ACP
to it exactly as an editor does. Modules: `matrix` (read and check the TOML file),
`schemas` (the published JSON Schemas; the closed sets), `model` (cases, axes, cells),
`selection` (``-k``, ``--lf``), `cell` (one attempt as an ACP client), `client` (the
handler), `causes` (the one table of cause ids, transient or not), `expectations`,
`runner` (concurrency, retries, reruns, stopping), `baseline` (history and noise
model), `reports` (JUnit, JSON, Markdown), `github` (workflow commands), `progress`,
`processes` (process groups, the stop ladder, on `agybridge.procfs`), `app` (one run:
signals, judging, exit status), `cli`.
"""

from .cli import main as main
