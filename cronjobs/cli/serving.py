"""``cronjobs serve``: the dashboard, /metrics and /healthz over HTTP (the ``web`` extra)."""

from __future__ import annotations

import datetime as dt

import click

from cronjobs.cli.app import App, pass_app
from cronjobs.cli.options import PER_JOB, Command, per_job_option, threshold_options
from cronjobs.core.thresholds import Thresholds
from cronjobs.db.connect import startup_options_taken
from cronjobs.durations import parse_bounded
from cronjobs.errors import UsageError

# the extra's packages: an ImportError naming another module is a bug, not a missing extra
WEB_EXTRA = ("starlette", "uvicorn", "jinja2", "psycopg_pool", "multipart", "python_multipart")
MIN_TOKEN_CHARS = 16


@click.command(cls=Command)
@click.option("--host", default="127.0.0.1", show_default=True, envvar="CRONJOBS_SERVE_HOST",
              help="Address to listen on (0.0.0.0: every interface, e.g. in a container).")
@click.option("--port", type=click.IntRange(1, 65535), default=8765, show_default=True,
              envvar="CRONJOBS_SERVE_PORT", help="TCP port to listen on.")
@click.option("--admin-token", metavar="TOKEN", envvar="CRONJOBS_ADMIN_TOKEN",
              help="Enable the actions (trigger, pause, resume, retry, cancel, ack) for whoever "
                   "presents this token (at least 16 characters; prefer the environment "
                   "variable, which `ps` does not show). Without it the server is read-only.")
@click.option("--refresh", default="10s", show_default=True, metavar="DURATION",
              envvar="CRONJOBS_SERVE_REFRESH", help="How often open pages refresh themselves.")
@threshold_options
@per_job_option("--metrics-per-job", "CRONJOBS_SERVE_METRICS_PER_JOB")
@click.option("--no-access-log", is_flag=True, help="Do not log each request on stderr.")
@pass_app
def serve(app: App, host: str, port: int, admin_token: str | None, refresh: str,
          thresholds: Thresholds, per_job: str, no_access_log: bool) -> None:
    """Serve the dashboard (/), Prometheus metrics (/metrics) and the health verdict of
    `status --check` (/healthz: 200 or 503, with the thresholds of `status`: --max-tick-age
    and the others) over HTTP. Needs the web extra:
    pip install 'cronjobs[web]'.

    Read-only unless started with an admin token (better from the environment, which `ps`
    does not show); then the dashboard signs in with it, and scripts send it with each POST
    as `Authorization: Bearer TOKEN` (see "Run the dashboard" in the docs).

    \b
    Examples:
      cronjobs serve                                  # http://127.0.0.1:8765
      cronjobs serve --host 0.0.0.0 --port 8080       # in a container
      cronjobs serve --admin-token "$(cat /run/secrets/cronjobs-admin-token)"
    """
    try:  # the optional web extra (starlette, uvicorn, jinja2, psycopg-pool)
        from cronjobs.web import server, site  # noqa: PLC0415
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in WEB_EXTRA:
            raise
        raise UsageError("`cronjobs serve` needs the web extra: pip install 'cronjobs[web]' "
                         f"(missing module {exc.name})") from None
    if admin_token is not None and len(admin_token) < MIN_TOKEN_CHARS:
        raise UsageError(f"invalid --admin-token: use at least {MIN_TOKEN_CHARS} characters "
                         "(e.g. `openssl rand -hex 24`)")
    every = parse_bounded(refresh, option="--refresh", minimum=dt.timedelta(seconds=2),
                          maximum=dt.timedelta(hours=1))
    sock = server.listen(host, port)  # a port in use: one line, before anything starts
    conninfo = app.conninfo()  # connected once: the schema is checked, errors are clear
    startup_options = startup_options_taken(app.store().conn)  # (refused by a pooler?)
    app.store().close()  # the server's pool opens its own connections
    settings = site.Settings(conninfo=conninfo, admin_token=admin_token or None,
                             refresh=every, thresholds=thresholds,
                             metrics_per_job=PER_JOB[per_job],
                             application_name=app.application_name(),
                             prepared=app.target.prepared,
                             startup_options=startup_options)
    shown = f"[{host}]" if ":" in host else host
    mode = "actions enabled (admin token set)" if admin_token else "read-only"
    click.echo(f"serving the dashboard on http://{shown}:{port}/ ({mode})", err=True)
    server.serve(settings, sock, access_log=not no_access_log)
