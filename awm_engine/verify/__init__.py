"""Verdicts: verifiers in a sandboxed child (and its warm host), the LLM judge, labels → rewards.

May import: data, sandbox, db, runtime, agent.
"""
