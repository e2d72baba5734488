"""BFCLv3 through awm's engine, scored by the official checkers of the ``bfcl-eval`` wheel.

- ``wheel``: whether the pinned wheel and its minimal extras are installed; importing it the way awm needs
  (``BFCL_PROJECT_ROOT`` in awm's cache, a stub ``bfcl_eval.constants.model_config``).
- ``categories``: the 17 v3 categories, their groups and the wheel's file names; entries no answer can pass.
- ``data``: the wheel's prompt entries and possible answers, selected by category, group and limit.
- ``prompting``: awm's own system prompt (prompt mode), BFCL's tools (FC mode), multi-turn messages.
- ``ground_truth``: the ``--policy ground-truth`` answers built from the possible answers.
- ``checker`` (runs in the sandbox only): decoding, execution and the official per-entry scoring.
- ``host`` (the sandboxed process) and ``sandboxed`` (awm's handle on it): every decode, every ``eval()`` of
  a model's call and every check runs in a persistent worker of a sandboxed host (one host per run), never in
  awm's own process.
- ``run``: ``awm bench bfcl run`` — config, results, metadata, resume, lock, concurrency.
- ``scores``: the v3 aggregation (and the wheel's v4 formula, the AWM paper's columns); reports.
- ``bfcl_files``: BFCL's own result and score file formats (export, ``awm bench bfcl score``).

May import: data, sandbox, db, runtime, agent, verify, eval.
"""
