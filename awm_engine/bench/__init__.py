"""Benchmarks outside AWM, run through the same engine: one subpackage per benchmark (``bfcl/``, and the
others beside it), each with its own data, prompting, rollouts through awm's model endpoints, run
directories in awm's run formats (``eval`` provides them, with results and resume), scoring and reports.

May import: data, sandbox, db, runtime, agent, verify, eval.
"""
