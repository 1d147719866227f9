"""``cronjobs serve``: the dashboard, ``/metrics`` and ``/healthz`` over HTTP (the optional
``web`` extra: Starlette, Jinja2 and uvicorn).

The top of the layers, beside the CLI: it reads through the same core functions the
commands call (overview, describe, explain, show, status, metrics) and acts through the
same operations (trigger, pause, resume, retry, cancel, ack); nothing below imports it.
Importing this package imports nothing; ``cronjobs.web.app`` needs the extra.
"""
