"""Secrets from the environment, scrubbed from any text that leaves the process.

An API key reaches a tool through the environment (``api_key_env``); an endpoint that echoes it
(into a reply, an error page, a tool-call argument) must not get it spoken, journaled, logged or
published. :func:`scrub` replaces every environment secret, and anything shaped like a bearer
token, with :data:`SCRUBBED`. It is applied where tool output enters the harness (results,
payloads, error reasons), so it protects every tool, whatever its own redaction does, and to
frontend error messages on the timeline (a remote frontend's error may quote its token).

An environment variable is a secret when its name says so (``*_KEY``, ``*TOKEN*``,
``*SECRET*``, ``*PASSWORD*``, ``*CREDENTIAL*``, ``*AUTH*``) and its value is at least
:data:`MIN_SECRET_CHARS` long (shorter values would match ordinary words).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

#: What a scrubbed secret becomes.
SCRUBBED = "[redacted]"
#: Values shorter than this are not treated as secrets (they would match ordinary text).
MIN_SECRET_CHARS = 8
#: Environment variable names whose values are secrets.
SECRET_ENV_NAME = re.compile(
    r"(?:^|_)(?:API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIALS?|AUTH\w*)"
    r"(?:_|$)|TOKEN|SECRET|PASSWORD",
    re.IGNORECASE,
)
#: Shapes that are secrets wherever they come from (an echoed Authorization header, a key).
_SHAPES = re.compile(
    r"(?i:\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}|\bsk-[A-Za-z0-9_-]{16,}|\bgh[pousr]_[A-Za-z0-9]{20,}"
)


def env_secrets(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The secret values of the environment, longest first."""
    env = os.environ if environ is None else environ
    values = {
        value.strip()
        for name, value in env.items()
        if SECRET_ENV_NAME.search(name) and len(value.strip()) >= MIN_SECRET_CHARS
    }
    return tuple(sorted(values, key=len, reverse=True))


def scrub(text: str, secrets: tuple[str, ...] | None = None) -> str:
    """``text`` with every environment secret and bearer-token shape replaced by
    :data:`SCRUBBED`."""
    if not text:
        return text
    for secret in env_secrets() if secrets is None else secrets:
        if secret in text:
            text = text.replace(secret, SCRUBBED)
    return _SHAPES.sub(SCRUBBED, text)


def scrub_value(value: Any, secrets: tuple[str, ...] | None = None) -> Any:
    """:func:`scrub` applied to every string (keys too) inside JSON-like data."""
    secrets = env_secrets() if secrets is None else secrets
    if isinstance(value, str):
        return scrub(value, secrets)
    if isinstance(value, Mapping):
        return {scrub(str(k), secrets): scrub_value(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_value(v, secrets) for v in value]
    return value
