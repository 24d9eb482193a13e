"""A session's files on disk: the private staging root, the MCP config, skills,
snapshots and the mutation log, and reads checked against the session's roots."""
