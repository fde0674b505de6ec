"""Errors shared across layers."""

from __future__ import annotations


class DeviceError(RuntimeError):
    """A sound card, camera or file a component needs is missing or unusable.

    The message names the device and says how to fix it (a file source, a virtual device).
    """
