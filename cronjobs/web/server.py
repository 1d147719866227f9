"""Running the application under uvicorn (what `cronjobs serve` calls)."""

from __future__ import annotations

import errno
import socket

import uvicorn

from cronjobs.errors import UsageError
from cronjobs.web.app import create_app
from cronjobs.web.security import MAX_BODY_BYTES
from cronjobs.web.site import Settings


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything else starts, so that a port in use or
    an address this machine does not have is one line (exit 2), not uvicorn's log."""
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror:
        raise UsageError(f"invalid --host {host!r}: no such address (use an address of "
                         "this machine, e.g. 127.0.0.1 or 0.0.0.0)") from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise UsageError(f"cannot listen on {where}: the port is in use (by another "
                             "`cronjobs serve`?); choose another with --port") from None
        if exc.errno == errno.EACCES:
            raise UsageError(f"cannot listen on {where}: not allowed (ports below 1024 need "
                             "privileges); choose another with --port") from None
        raise UsageError(f"cannot listen on {where}: {exc.strerror or exc} (--host, "
                         "--port)") from None
    sock.set_inheritable(True)
    return sock


def serve(settings: Settings, sock: socket.socket, *, access_log: bool = True) -> None:
    """Serve on ``sock`` (see :func:`listen`) until SIGTERM or SIGINT (then finish the
    requests under way, for 5 s at most)."""
    host, port = sock.getsockname()[:2]
    config = uvicorn.Config(create_app(settings), host=host, port=port, access_log=access_log,
                            log_level="info", server_header=False, date_header=True,
                            limit_concurrency=200, timeout_keep_alive=5,
                            timeout_graceful_shutdown=5,
                            h11_max_incomplete_event_size=MAX_BODY_BYTES, proxy_headers=False)
    uvicorn.Server(config).run(sockets=[sock])
