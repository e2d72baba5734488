"""Agents acting in an episode: the rollout loop and its step events, policies, the meta-tool protocol,
model endpoints, the scripted OpenAI-compatible LLM, and replay of recorded runs.

May import: data, sandbox, db, runtime.
"""
