"""Secret scrubbing for the harness: :mod:`venus_ros.core.secrets`, under its harness name."""

from venus_ros.core.secrets import (
    MIN_SECRET_CHARS,
    SCRUBBED,
    SECRET_ENV_NAME,
    env_secrets,
    scrub,
    scrub_value,
)

__all__ = ["MIN_SECRET_CHARS", "SCRUBBED", "SECRET_ENV_NAME", "env_secrets", "scrub", "scrub_value"]
