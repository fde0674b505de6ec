"""A test node serving an action and a service, run as a process of its own.

    python tests/ros_servers.py --ros-args -r __ns:=/x

- ``act`` (action, ``venus_interfaces/action/Delegate``), by the goal's query:
  - ``"ok N"``: N feedback messages (progress i/N), then SUCCEEDED with reply_text "did N steps";
  - ``"echo"``: SUCCEEDED at once, reply_text the goal's fields as JSON;
  - ``"abort"``: one feedback message, then ABORTED with reply_text "blocked by an obstacle";
  - ``"slow"``: feedback every 50 ms until a cancel is requested (accepted), then CANCELED;
  - ``"late"``: like ``slow``, but once the cancel is accepted it SUCCEEDS anyway (the work
    had already been done when the cancel came);
  - ``"stubborn N"``: refuses cancel requests; N feedback messages, then SUCCEEDED.
- ``switch`` (service, ``std_srvs/srv/SetBool``): success = data, message "switched on|off".

Every goal, cancel request and outcome is printed on a line of its own (tests wait for them).
Work runs on a thread per goal; the execute callback only sets the final state (nothing
blocks the single-threaded executor).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from rclpy.action import ActionServer, CancelResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.node import Node
from std_srvs.srv import SetBool

from venus_interfaces.action import Delegate
from venus_ros.nodes.runtime import run_node

STEP_S = 0.02
SLOW_STEP_S = 0.05
#: A goal that is never cancelled gives up (aborts) after this long.
GIVE_UP_S = 30.0


def say(text: str) -> None:
    print(text, flush=True)


class RosServers(Node):
    def __init__(self) -> None:
        super().__init__("ros_servers")
        self._outcomes: dict[bytes, tuple[str, Delegate.Result]] = {}
        self._lock = threading.Lock()
        self._action = ActionServer(
            self,
            Delegate,
            "act",
            execute_callback=self._finish,
            handle_accepted_callback=self._on_accepted,
            cancel_callback=self._on_cancel,
        )
        self._service = self.create_service(SetBool, "switch", self._on_switch)
        say("ros_servers ready")

    def _on_accepted(self, handle: ServerGoalHandle) -> None:
        say(f"goal: {handle.request.query}")
        threading.Thread(target=self._work, args=(handle,), daemon=True).start()

    def _on_cancel(self, handle: ServerGoalHandle) -> CancelResponse:
        query = handle.request.query
        if query.startswith("stubborn"):
            say(f"cancel refused: {query}")
            return CancelResponse.REJECT
        say(f"cancel requested: {query}")
        return CancelResponse.ACCEPT

    def _work(self, handle: ServerGoalHandle) -> None:
        query: str = handle.request.query
        word, _, rest = query.partition(" ")
        state, reply = "succeed", ""
        if word in ("ok", "stubborn"):
            steps = int(rest or "1")
            for i in range(1, steps + 1):
                self._feedback(handle, i / steps, f"step {i} of {steps}")
                time.sleep(STEP_S)
            reply = f"did {steps} steps"
        elif word == "echo":
            request = handle.request
            reply = json.dumps(
                {
                    "query": request.query,
                    "session_id": request.session_id,
                    "turn_id": request.turn_id,
                    "evidence_cutoff_seq": request.evidence_cutoff_seq,
                }
            )
        elif word == "abort":
            self._feedback(handle, 0.5, "trying")
            state, reply = "abort", "blocked by an obstacle"
        elif word in ("slow", "late"):
            deadline = time.monotonic() + GIVE_UP_S
            i = 0
            while not handle.is_cancel_requested and time.monotonic() < deadline:
                i += 1
                self._feedback(handle, 0.0, f"working {i}")
                time.sleep(SLOW_STEP_S)
            if not handle.is_cancel_requested:
                state, reply = "abort", "nobody cancelled me"
            elif word == "slow":
                state, reply = "cancel", "stopped"
            else:
                reply = "already delivered"
        else:
            state, reply = "abort", f"unknown query {query!r}"
        result = Delegate.Result(final_state=state, reply_text=reply, payload_json="{}")
        with self._lock:
            self._outcomes[bytes(handle.goal_id.uuid)] = (state, result)
        handle.execute()  # the execute callback (on the executor) sets the final state

    def _feedback(self, handle: ServerGoalHandle, progress: float, message: str) -> None:
        handle.publish_feedback(
            Delegate.Feedback(state="RUNNING", progress=progress, message=message)
        )

    def _finish(self, handle: ServerGoalHandle) -> Delegate.Result:
        with self._lock:
            state, result = self._outcomes.pop(bytes(handle.goal_id.uuid))
        if state == "succeed":
            handle.succeed()
        elif state == "cancel":
            handle.canceled()
        else:
            handle.abort()
        say(f"outcome: {handle.request.query}: {state}")
        return result

    def _on_switch(self, request: Any, response: Any) -> Any:
        response.success = bool(request.data)
        response.message = f"switched {'on' if request.data else 'off'}"
        say(f"service: {response.message}")
        return response


if __name__ == "__main__":
    raise SystemExit(run_node(RosServers))
