"""Keep bearer tokens out of logs: the ``websockets`` library logs request headers at DEBUG."""

from __future__ import annotations

import logging

#: Loggers that may see an ``Authorization`` header.
LOGGERS = ("websockets.client", "websockets.server", "venus_ros.serve.ws")


class RedactAuthorization(logging.Filter):
    """Replace the value logged after an ``Authorization`` header name with ``[redacted]``."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact in place; never drops a record."""
        args = record.args
        if isinstance(args, tuple) and args:
            names = [str(a).lower() for a in args]
            if "authorization" in names:
                i = names.index("authorization")
                record.args = (*args[: i + 1], "[redacted]", *args[i + 2 :])
        elif "authorization" in str(record.msg).lower():
            record.msg = "[a message with an Authorization header, redacted]"
            record.args = ()
        return True


def install() -> None:
    """Add the filter to every logger that may log headers (idempotent)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactAuthorization) for f in logger.filters):
            logger.addFilter(RedactAuthorization())
