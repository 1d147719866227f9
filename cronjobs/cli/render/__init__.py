"""Turning results into output: aligned tables for people, stable JSON for machines, one
module per concept — ``jobs`` (define, list, describe, preview), ``runs`` (a run's facts,
show, ack, runs), ``ticks`` (a tick's report), ``explain`` (explain, backfill), ``groups``
(a group's usage), ``status`` (status, retention), and ``common`` (what they share).

Each command imports the modules it renders with, and this package imports none of them:
`cronjobs tick`, which starts every minute, loads the render of a tick's report alone, not
what the other renders read (core.explain, core.health, cronjobs.reports).

The JSON shapes are documented in docs/reference/json.md; change them only additively.
"""
