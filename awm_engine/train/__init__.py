"""Training hooks: history-aware training samples from recorded rollouts (``samples``), GRPO groups and
advantages (``grpo``), their export as JSONL or Parquet (``export``), a Gym-style episode API over the engine's
own episode lifecycle (``gym``: ``reset(scenario, task)`` / ``step(action)``, async, batched, and a synchronous
wrapper), a real ``gymnasium.Env`` over it (``gymnasium_env``: ``awm/AWM-v0``, text spaces), sessions keyed per request (``sessions``), and the trainer adapters over that API: a verl agent loop
(``verl_loop``) and a TRL environment class (``trl_env``). verl, TRL and pyarrow are optional: nothing here
imports them at module level, and each adapter says what it needs when it is missing (``gymnasium_env`` imports
gymnasium, of the ``train`` extra, when it is imported).

May import: data, sandbox, db, runtime, agent, verify, eval.
"""
