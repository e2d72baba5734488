"""MCP-Universe (Salesforce, arXiv 2508.14704) through awm's engine: tasks from a user's checkout, agent runs
against the configured MCP servers, evaluation of the final answers, success rates per domain and Overall.

- ``tasks``: the suite YAMLs and task JSON of a checkout (``--mcp-universe DIR``), the suites' task paths
  (``test/<domain>/…`` at v1.0.0, ``mcpuniverse/<domain>/…`` later) mapped onto the checkout's folders, the
  paper's domains, ``{{VAR}}`` placeholders rendered from the environment (unknown ones kept literally).
- ``servers``: MCP server definitions, in the common ``{"mcpServers": {...}}`` shape or MCP-Universe's
  ``server_list.json``, with ``${VAR}`` / ``{{VAR}}`` placeholders filled from the environment.
- ``evaluators``: the ``func`` chain (json, get, len, foreach, raw, list) and the ``op`` semantics, our own
  code; the static domain operators; an operator needing a live service or external software reports
  ``needs: SERVICE`` instead of a verdict.
- ``scores``: task verdicts and success rates per domain and Overall (micro-average; a task passes only if
  every evaluator passes; multi-server tasks never counted twice), the paper's and the AWM paper's columns.
- ``episode`` / ``run``: an MCP-client episode over several servers (each started in awm's sandbox) and
  ``awm bench mcp-universe run`` (config, results, metadata, resume, lock).

May import: data, sandbox, db, runtime, agent, verify, eval.
"""
