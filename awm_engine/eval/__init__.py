"""Evaluation: one episode from task to reward, batch runs with streaming results and resume, metrics,
reports, and discovery of run directories.

May import: data, sandbox, db, runtime, agent, verify.
"""
