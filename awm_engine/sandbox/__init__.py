"""How untrusted code is started: the scrubbed environment and the sandbox launcher every subprocess
that runs generated code goes through.

May import: data.
"""
