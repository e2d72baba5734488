"""Synthesis: from seed names to whole AWM environments (``awm gen …``).

Each stage — scenario, task, db, sample, spec, env, verifier — asks an OpenAI-compatible model for an artifact,
runs what came back in the sandbox (DDL and inserts, the environment with every tool called, the verifiers on the
initial database), and retries with a summary of the errors, keeping the best attempt. Scenarios stream through
the stages independently; the output directory is the AWM layout (``gen_*.jsonl``) and is resumable.

May import: data, sandbox, db, runtime, agent, verify, eval.
"""
