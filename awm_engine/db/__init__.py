"""SQLite databases: the exact AWM build, template databases copied per episode, snapshots and row diffs.

May import: data, sandbox.
"""
