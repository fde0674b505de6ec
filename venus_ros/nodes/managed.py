"""Lifecycle (managed) nodes: configure loads and opens, activate streams, deactivate pauses.

A :class:`ManagedNode` is an ``rclpy.lifecycle.LifecycleNode`` whose transitions call four
methods of the subclass, each of which may raise :class:`~venus_ros.core.errors.DeviceError` or
:class:`~venus_ros.nodes.params.ConfigError`:

====================  ===================  ==================================================
transition            method               what it does in venus_ros nodes
====================  ===================  ==================================================
configure             ``setup()``          load models, open devices and files
activate              ``start()``          start streaming (timers, capture threads)
deactivate            ``stop()``           stop streaming, keep what ``setup`` loaded
cleanup / shutdown    ``teardown()``       release what ``setup`` opened
====================  ===================  ==================================================

With the read-only parameter ``autostart`` (default true) the process configures and activates
its node itself, so ``ros2 run`` and ``venus-ros run`` work without a lifecycle manager; set it
false to let a manager (``ros2 lifecycle set``, nav2's lifecycle_manager, launch_ros events)
sequence the nodes. Parameters are declared in the constructor, so they can be listed and set
in the unconfigured state.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn

from venus_ros.core.errors import DeviceError
from venus_ros.nodes.params import ConfigError


class ManagedNode(LifecycleNode):
    """A lifecycle node built from ``setup``/``start``/``stop``/``teardown``.

    Args:
        node_name: the node's name.
        **kwargs: passed to :class:`rclpy.node.Node` (``context``, ``namespace``,
            ``parameter_overrides``, ``cli_args``...), so several nodes can share a process.

    Attributes:
        autostart: configure and activate without a lifecycle manager.
        error: what the last failed ``setup``/``start`` raised (None if none did).
    """

    def __init__(self, node_name: str, **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self.autostart = bool(
            self.declare_parameter(
                "autostart",
                True,
                ParameterDescriptor(
                    description="configure and activate at start-up, without a lifecycle "
                    "manager (read-only)",
                    read_only=True,
                ),
            ).value
        )
        self.error: DeviceError | ConfigError | None = None
        self._active = threading.Event()
        self._configured = False
        self._transition_lock = threading.Lock()
        self._log_errors = True  # off during autostart: the process prints the one line

    # --- what subclasses implement ---------------------------------------------------------

    def setup(self) -> None:
        """Load and open what the node needs (configure)."""

    def start(self) -> None:
        """Start streaming (activate)."""

    def stop(self) -> None:
        """Stop streaming, keeping what ``setup`` loaded (deactivate)."""

    def teardown(self) -> None:
        """Release what ``setup`` opened (cleanup, shutdown)."""

    # --- state -------------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        """The node is in the active state (its streams run)."""
        return self._active.is_set()

    def while_up(self, send: Callable[..., object], *args: Any) -> bool:
        """Call ``send(*args)`` (a publish); False, and nothing raised, if the process is
        shutting down.

        Ctrl-C or SIGTERM shuts the context down on rclpy's own signal thread, so a
        ``context.ok()`` checked just before publishing can still be followed by rclpy's
        "publisher's context is invalid": at shutdown that is no error. Any other failure, or
        one while the context is up, is raised.
        """
        try:
            send(*args)
        except RuntimeError:  # rclpy's RCLError
            if self.context.ok():
                raise
            return False
        return True

    def start_up(self) -> None:
        """Configure and activate now (``autostart``).

        Raises:
            DeviceError, ConfigError: what ``setup`` or ``start`` raised.
        """
        self._log_errors = False
        try:
            for name, trigger in (
                ("configure", self.trigger_configure),
                ("activate", self.trigger_activate),
            ):
                if trigger() != TransitionCallbackReturn.SUCCESS:
                    if self.error is not None:
                        raise self.error
                    raise DeviceError(f"{self.get_name()}: {name} failed")
        finally:
            self._log_errors = True

    def close(self) -> None:
        """Stop and release everything (idempotent; the process is ending)."""
        with self._transition_lock:
            self._stop_streams()
            self._release()

    # --- transitions -------------------------------------------------------------------------

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Run ``setup``; a device or configuration error fails the transition."""
        with self._transition_lock:
            if not self._guard(self.setup):
                self.teardown()  # whatever setup opened before it failed
                return TransitionCallbackReturn.FAILURE
            self._configured = True
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Enable lifecycle publishers, then ``start``."""
        with self._transition_lock:
            super().on_activate(state)
            if not self._guard(self.start):
                super().on_deactivate(state)
                return TransitionCallbackReturn.FAILURE
            self._active.set()
        self.get_logger().info("active")
        return TransitionCallbackReturn.SUCCESS

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """``stop``, then disable lifecycle publishers."""
        with self._transition_lock:
            self._stop_streams()
            super().on_deactivate(state)
        self.get_logger().info("inactive")
        return TransitionCallbackReturn.SUCCESS

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        """``teardown``: back to unconfigured."""
        with self._transition_lock:
            self._release()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Stop and release from any state."""
        with self._transition_lock:
            self._stop_streams()
            self._release()
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Release what is open; the node goes back to unconfigured."""
        with self._transition_lock:
            self._stop_streams()
            self._release()
        return TransitionCallbackReturn.SUCCESS

    # --- helpers -------------------------------------------------------------------------------

    def _guard(self, step: Any) -> bool:
        try:
            step()
        except (DeviceError, ConfigError) as exc:
            self.error = exc
            if self._log_errors:
                self.get_logger().error(str(exc))
            return False
        self.error = None
        return True

    def _stop_streams(self) -> None:
        if self._active.is_set():
            self._active.clear()
            self.stop()

    def _release(self) -> None:
        if self._configured:
            self._configured = False
            self.teardown()
