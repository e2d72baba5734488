"""Environments running: generated code loading, OpenAPI → MCP tools, in-process ASGI calls, the worker
pool and its worker protocol, the episode interface, MCP server and client, health checks.

May import: data, sandbox, db.
"""
