"""Running the application under uvicorn (what `cronjobs serve` calls)."""

from __future__ import annotations

import uvicorn

from cronjobs.web.app import create_app
from cronjobs.web.security import MAX_BODY_BYTES
from cronjobs.web.site import Settings


def serve(settings: Settings, *, host: str, port: int, access_log: bool = True) -> None:
    """Serve until SIGTERM or SIGINT (then finish the requests under way, for 5 s at most)."""
    uvicorn.run(create_app(settings), host=host, port=port, access_log=access_log,
                log_level="info", server_header=False, date_header=True,
                limit_concurrency=200, timeout_keep_alive=5, timeout_graceful_shutdown=5,
                h11_max_incomplete_event_size=MAX_BODY_BYTES, proxy_headers=False)
