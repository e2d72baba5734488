"""τ²-bench (airline, retail, telecom) as environments of the engine, built from spec/tau2.md: the loader of a τ²
data directory (``data``: tasks, policies, databases, splits, task versions), the domains' databases
(``models``) and tools (``airline``, ``retail``, ``telecom`` with the phone simulation; ``toolkit``,
``environment``), the domains as hosted episodes of the worker pool (``episode``, ``store``), the orchestrator of
agent, simulated user and environment (``orchestrator``, ``prompts``), scoring exactly as τ²-bench does
(``evaluation``), pass^k and pass@k (``metrics``), batch runs in awm's run directories (``run``), re-scoring τ²'s
own simulation files (``score``) and reports (``report``).

May import: data, sandbox, db, runtime, agent, verify, eval.
"""
