"""AWM data on disk: the catalog of scenarios, typed records, JSONL reading, name normalization, paths,
and the versioned run formats (trajectory, events, results, run config).

May import: nothing else in awm_engine.
"""
