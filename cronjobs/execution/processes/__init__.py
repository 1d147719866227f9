"""The helper processes a tick starts besides its jobs, one entry point each. (The tick
imports only what it shares with them: the fence's line protocol, the encoding of a
handler's result.)

- :mod:`.handler`: one handler attempt in a fresh interpreter (and the calling of a handler
  that a forked child and an in-process run share).
- :mod:`.template`: the template process that imports the ``--app`` modules once and forks
  a child per handler attempt.
- :mod:`.fence`: the watchdog, and the template of a tick without handlers, which only
  fences (standard library only: they start isolated).
"""
