"""agy's stream-json, translated to ACP: pure code, no I/O (the mapper, tool
calls, the tool catalogue, streamed text, usage, notices, replayed history,
diffs, proposals, image candidates)."""
