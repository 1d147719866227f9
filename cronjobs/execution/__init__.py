"""Running claimed runs.

The loop and its parts (river's producer, completer and rescuer):

- ``executor``: the :class:`~cronjobs.execution.executor.Executor`, the loop of one tick,
  composing the parts below; ``options``: the one :class:`TickOptions` object it is given.
- ``claim_loop``: capacity, gathering slots into batches, back-off; starting claimed runs.
- ``completer``: outcomes fenced by the lease token, failure counts, the one-by-one fallback.
- ``lease_keeper``: heartbeats, stops (lost, cancelled, interrupted), the watchdog's deadlines.
- ``reclaimer``: expired leases of other workers.
- ``state``: what they share (the attempts under way, the report, the database reached
  through the retry policy); ``outcome``: what an attempt comes to (pure).

Around the runs: ``alerts`` (alert commands), ``outbox`` (the notifications an outcome
causes, written in its transaction, then sent), ``observe`` (live output, spans),
``notify`` (webhooks), ``tracing`` (OpenTelemetry, the ``otel`` extra).

Running them: ``runners/`` (one ``Runner`` protocol over the run modes: ``shell``,
``forked`` from the ``template`` process, ``interpreter``, ``inprocess``), ``watchdog``,
and ``processes/``, the helper processes (``handler``, ``template``, ``fence``). What a
handler sees: ``registry`` (``@cronjobs.job``) and ``context``.

This package may import ``cronjobs.db``, ``cronjobs.models`` and ``cronjobs.errors``; never
``core``, the tick or the CLI.
"""
