"""harness_node: the Delegate action server in front of the Harness runner.

- ``delegate`` (action, ``venus_interfaces/action/Delegate``): a goal becomes a task; feedback
  on every transition; a cancel request is forwarded to the runner; the result carries the
  final state (COMPLETED, FAILED or CANCELLED: delivery is the frontend's job), the polished
  reply and the tool's payload. Goals with an empty query, a query over
  :data:`MAX_QUERY_CHARS` characters, or another session's id are rejected at goal time.
- ``timeline`` (in): the frontend's timeline, mirrored (under the original seq) so a task sees
  the records at or before its evidence cutoff. A goal that overtakes its cutoff record waits
  for it (up to ``evidence_wait_s``) before its task is submitted.
- ``task_status`` and ``timeline`` (out): a TaskStatus and a ``task_state`` TimelineEvent for
  every transition. Those events carry ``"source": "harness"`` in their payload and a seq of
  the harness's own event stream (not the frontend's), so the mirror skips them.
- ``backend_reply`` (out): replies no Delegate goal waits for. Every task and transition is
  journaled (:mod:`venus_ros.harness.journal`, parameter ``journal_path``) before it is acted
  on; on start the node recovers what a previous process left (rules in
  :mod:`venus_ros.harness.recovery`). A COMPLETED task whose reply never left the old process
  (its goal died with it) and a re-run task that completes are published here as a
  BackendReply, once some subscriber (the frontend) has matched, and moved to DELIVERING; a
  reply older than ``reply_max_age_s`` is dropped (FAILED, stale) rather than spoken as if
  fresh. A Delegate result carrying a reply moves its task to DELIVERING (a restart never
  repeats it).
- Timers and reminders are scheduled jobs in the journal (:mod:`venus_ros.harness.schedule`):
  setting one is a short task; when a job is due (and a frontend listens) its ring goes out on
  ``backend_reply`` with the job id as task id, once, and its delivery report moves the job on.
- ``delivery`` (in, TaskStatus from the frontend): how each reply's delivery ended, moving its
  task on: DELIVERED once playback acknowledged it, FAILED when it was dropped (interrupted
  again, or stale), CANCELLED when it was withdrawn unheard (rules in
  :mod:`venus_ros.core.delivery`).
- Cancel requests ("stop", "never mind") and superseding requests (tools declared
  ``supersedes: true``) take work back in the runner (:mod:`venus_ros.harness.takeback`); the
  frontend withdraws the replies of tasks that end CANCELLED here.

No callback ever waits, so any number of goals run at once on any executor: a goal's task is
submitted when the goal is accepted, the goal stays ACCEPTED (action status) while the task runs
(its own state arrives as feedback), and when the task settles the runner thread calls
``goal_handle.execute()``, whose callback only sends the result.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.timer import Timer
from std_msgs.msg import Header

from venus_interfaces.action import Delegate
from venus_interfaces.msg import BackendReply, TaskStatus, TimelineEvent
from venus_ros.core.clock import Clock, MonotonicClock
from venus_ros.core.timeline import Kind, Timeline
from venus_ros.harness.evidence import EvidenceMirror, Outcome
from venus_ros.harness.journal import SYNCHRONOUS, Journal, JournalError, default_journal_path
from venus_ros.harness.polish import reply_text
from venus_ros.harness.runner import HarnessRunner
from venus_ros.harness.schedule import JOB_PREFIX, Schedule
from venus_ros.harness.tasks import Task, TaskState
from venus_ros.harness.toolconfig import (
    RosToolEntry,
    ToolConfigError,
    build_registry,
    load_tool_config,
    make_router,
)
from venus_ros.harness.tools import Tool, UnknownToolError
from venus_ros.nodes.convert import record_to_msg
from venus_ros.nodes.managed import ManagedNode
from venus_ros.nodes.params import ConfigError, declare_config, reject_unknown_overrides
from venus_ros.nodes.qos import TOPICS, qos_for
from venus_ros.nodes.runtime import run_node
from venus_ros.paths import share_path
from venus_ros.ros.goal_book import CancelAnswer, Goal, GoalBook

#: Queries longer than this are rejected at goal time (the span parser's limit too).
MAX_QUERY_CHARS = 4000
#: While goals wait (for evidence, or to end CANCELED), they are checked at this period.
POLL_PERIOD_S = 0.05
#: How long a CANCELLED task's result waits for the action's CANCELING state.
CANCEL_STATE_WAIT_S = 0.5


#: How often the harness says it is alive on the heartbeat topic.
HEARTBEAT_PERIOD_S = 0.5
#: How often due timers are looked for.
RING_PERIOD_S = 0.1


@dataclass(frozen=True)
class HarnessConfig:
    """Parameters of harness_node."""

    tools_file: str = field(
        default="",
        metadata={"help": "tool declarations (YAML); '' = the package's config/tools.yaml"},
    )
    tools: tuple[str, ...] = field(
        default=(),
        metadata={"help": "names of the tools that may run; empty = the file's `enabled` list"},
    )
    max_concurrent: int = field(
        default=4, metadata={"help": "tasks running at once; more wait QUEUED"}
    )
    session_id: str = field(
        default="default",
        metadata={"help": "the session served (other sessions' goals are rejected)"},
    )
    evidence_wait_s: float = field(
        default=0.5,
        metadata={"help": "how long a goal waits for its cutoff record to arrive on timeline, s"},
    )
    journal_path: str = field(
        default="",
        metadata={
            "help": "task journal (SQLite); '' = $XDG_STATE_HOME/venus_ros/harness[.<namespace>]"
            ".sqlite3 (~/.local/state when unset); 'none' = no journal (a crash loses tasks)"
        },
    )
    journal_synchronous: str = field(
        default="NORMAL",
        metadata={
            "help": "NORMAL: a transition survives a killed process; FULL: fsync each one, "
            "survives power loss too (slower)"
        },
    )
    reply_max_age_s: float = field(
        default=120.0,
        metadata={"help": "undelivered replies older than this at start are dropped, not spoken"},
    )
    time_scale: float = field(
        default=1.0,
        metadata={
            "help": "tests and demos only: timers run this many times faster than real time "
            "(a 10-minute timer rings after 10 s at 60)"
        },
    )

    def __post_init__(self) -> None:
        if self.max_concurrent < 1:
            raise ValueError(f"max_concurrent must be >= 1, got {self.max_concurrent}")
        if not self.session_id:
            raise ValueError("session_id must not be empty")
        if not 0.0 <= self.evidence_wait_s <= 10.0:
            raise ValueError(f"evidence_wait_s must be in [0, 10], got {self.evidence_wait_s}")
        if self.journal_synchronous.upper() not in SYNCHRONOUS:
            raise ValueError(
                f"journal_synchronous must be one of {', '.join(SYNCHRONOUS)}, "
                f"got {self.journal_synchronous!r}"
            )
        if not self.reply_max_age_s > 0:
            raise ValueError(f"reply_max_age_s must be > 0, got {self.reply_max_age_s}")
        if not 0.0 < self.time_scale <= 1000.0:
            raise ValueError(f"time_scale must be in (0, 1000], got {self.time_scale}")


class HarnessNode(ManagedNode):
    """The Delegate action server; see the module docstring for its topics.

    A lifecycle node: the journal, the tools and recovery are set up when the node is built;
    goals are accepted and the heartbeat is sent only while it is active (an inactive harness
    looks down to the frontend, which then fails delegations at once).

    Args:
        clock: the session clock (real monotonic time by default).
        node_name: the node's name.
        **kwargs: :class:`rclpy.node.Node` keyword arguments (``context``, ...).
    """

    def __init__(
        self, clock: Clock | None = None, node_name: str = "harness_node", **kwargs: Any
    ) -> None:
        super().__init__(node_name, **kwargs)
        self.config = declare_config(self, HarnessConfig)
        reject_unknown_overrides(self, kwargs.get("parameter_overrides"))
        _forward_logs(self)
        self._group = ReentrantCallbackGroup()  # ROS tools' clients use it too
        self._journal = self._open_journal()
        scale = self.config.time_scale
        self._schedule = Schedule(
            self._journal.path if self._journal is not None else None,
            wall=time.time if scale == 1.0 else (lambda: time.time() * scale),
            late_max_s=self.config.reply_max_age_s * scale,  # schedule times are scaled too
            late_note_s=5.0 * scale,
        )
        try:
            path = self.config.tools_file or str(share_path("config/tools.yaml"))
            tool_config = load_tool_config(path)
            if self.config.tools:
                tool_config = tool_config.with_enabled(self.config.tools)
            registry = build_registry(
                tool_config, ros_factory=self._ros_tool, schedule=self._schedule
            )
        except (FileNotFoundError, ToolConfigError, UnknownToolError, ValueError) as exc:
            self._schedule.close()
            if self._journal is not None:
                self._journal.close()
            raise ConfigError(f"parameters 'tools_file'/'tools': {exc}") from exc
        self._session_clock = clock or MonotonicClock()
        self._mirror = EvidenceMirror()
        self._events = Timeline(self._session_clock)
        self._lock = threading.Lock()  # guards the goal book and the offers
        self._goals = GoalBook(
            self._session_clock,
            evidence_wait_s=self.config.evidence_wait_s,
            cancel_state_wait_s=CANCEL_STATE_WAIT_S,
        )
        self._offers: dict[str, Task] = {}  # replies for backend_reply, waiting for a subscriber
        self._timer: Timer | None = None  # exists only while some goal waits
        self._status_pub = self.create_publisher(
            TaskStatus, TOPICS["task_status"], qos_for("task_status")
        )
        self._timeline_pub = self.create_publisher(
            TimelineEvent, TOPICS["timeline"], qos_for("timeline")
        )
        self._reply_pub = self.create_publisher(
            BackendReply, TOPICS["backend_reply"], qos_for("backend_reply")
        )
        # Liveness for the frontend: a killed process sends no goodbye, and DDS would only
        # notice after its lease (~20 s); a missing heartbeat is noticed in ~2 s.
        self._heartbeat_pub = self.create_publisher(
            Header, TOPICS["heartbeat"], qos_for("heartbeat")
        )
        self.create_timer(HEARTBEAT_PERIOD_S, self._heartbeat, callback_group=self._group)
        # The default (mutually exclusive) group keeps the records in arrival order.
        self.create_subscription(
            TimelineEvent, TOPICS["timeline"], self._on_timeline, qos_for("timeline")
        )
        self.create_subscription(
            TaskStatus, TOPICS["delivery"], self._on_delivery, qos_for("delivery")
        )
        self._runner = HarnessRunner(
            registry,
            self._session_clock,
            max_concurrent=self.config.max_concurrent,
            router=make_router(tool_config, registry),
            listeners=[self._on_transition, self._schedule.follow],
            progress_listeners=[self._on_progress],
            journal=self._journal,
            superseding=tool_config.superseding_names(),
        )
        try:
            recovery = self._runner.recover(
                self._mirror.snapshot, stale_after_s=self.config.reply_max_age_s
            )
        except (JournalError, RuntimeError, concurrent.futures.TimeoutError) as exc:
            self._runner.close()
            raise ConfigError(f"parameter 'journal_path': recovery failed: {exc}") from exc
        for task in recovery.undelivered:
            self._offer(task)
        self.create_timer(RING_PERIOD_S, self._ring, callback_group=self._group)
        self._server = ActionServer(
            self,
            Delegate,
            TOPICS["delegate"],
            execute_callback=self._result,
            goal_callback=self._on_goal,
            handle_accepted_callback=self._on_accepted,
            cancel_callback=self._on_cancel,
            callback_group=self._group,
        )
        journal = str(self._journal.path) if self._journal is not None else "none"
        self.get_logger().info(
            f"harness ready: tools {', '.join(registry.names)}, "
            f"{self.config.max_concurrent} at once, session {self.config.session_id!r}, "
            f"journal {journal} (recovered: {len(recovery.rerun)} re-run, "
            f"{len(recovery.failed)} failed, {len(recovery.cancelled)} cancelled, "
            f"{len(recovery.undelivered)} undelivered)"
        )

    @property
    def runner(self) -> HarnessRunner:
        """The runner behind the action server."""
        return self._runner

    def close(self) -> None:
        """Stop the runner (running tasks end FAILED, interrupted) and close the journal."""
        super().close()
        self._runner.close()
        self._schedule.close()
        if self._journal is not None:
            self._journal.close()

    @property
    def schedule(self) -> Schedule:
        """The timers and reminders (scheduled jobs in the journal)."""
        return self._schedule

    def _open_journal(self) -> Journal | None:
        spec = self.config.journal_path.strip()
        if spec.lower() == "none":
            self.get_logger().warning("journal_path is 'none': a crash loses every task")
            return None
        path = Path(spec).expanduser() if spec else default_journal_path(self.get_namespace())
        try:
            return Journal(path, synchronous=self.config.journal_synchronous)
        except JournalError as exc:
            raise ConfigError(f"parameter 'journal_path': {exc}") from exc

    # --- replies with no goal waiting: backend_reply ---------------------------------------

    def _offer(self, task: Task) -> None:
        """Publish the task's reply on backend_reply once a subscriber has matched (any thread).

        Until then it waits (a message published before discovery matched would be lost); if
        none ever matches it stays undelivered in the journal and the next start offers it.
        """
        with self._lock:
            self._offers[task.id] = task
            self._ensure_timer()

    def _publish_offers(self, offers: list[Task]) -> None:
        for task in offers:
            text = reply_text(task)
            if not text.strip():  # nothing to say: done with it
                self._runner.hand_off(task.id, "nothing to say")
                continue
            self._reply_pub.publish(
                BackendReply(
                    header=Header(stamp=self.get_clock().now().to_msg()),
                    task_id=task.id,
                    session_id=task.session_id,
                    turn_id=max(0, int(task.turn_id)),
                    evidence_cutoff_seq=max(0, int(task.cutoff_seq)),
                    text=text,
                    topic=task.tool,
                )
            )
            self._runner.advance(
                task.id, TaskState.DELIVERING, "offered on backend_reply: no Delegate goal waits"
            )

    # --- delivery outcomes in ----------------------------------------------------------------

    def _on_delivery(self, msg: TaskStatus) -> None:
        """The frontend reports how a reply's delivery ended: move the task on."""
        try:
            state = TaskState(msg.state)
        except ValueError:
            self.get_logger().warning(f"delivery report with unknown state {msg.state!r}")
            return
        if state not in _DELIVERY_ENDS:
            self.get_logger().warning(f"delivery report with state {msg.state} ignored")
            return
        task_id, reason = msg.task_id, f"frontend: {msg.message}"
        if task_id.startswith(JOB_PREFIX):  # a timer's ring
            job = self._schedule.delivered(task_id, state.value, reason)
            if job is not None:
                self._job_event(job.id, state.value, reason)
            return

        def done(result: concurrent.futures.Future[TaskState]) -> None:
            if result.exception() is not None:  # e.g. already CANCELLED here: nothing to do
                self.get_logger().debug(f"delivery of {task_id}: {result.exception()}")

        self._runner.advance(task_id, state, reason).add_done_callback(done)

    # --- timeline in -------------------------------------------------------------------------

    def _on_timeline(self, msg: TimelineEvent) -> None:
        outcome = self._mirror.add(msg.seq, msg.t, msg.kind, msg.payload_json)
        if outcome is Outcome.RESET:
            self.get_logger().info(f"timeline restarted at seq {msg.seq}: evidence cleared")
        elif outcome is Outcome.INVALID:
            self.get_logger().warning(f"timeline record {msg.seq} ({msg.kind}) is malformed")
        if self._timer is not None and outcome in (Outcome.ADDED, Outcome.RESET):
            self._poll()

    # --- action: goal -> task -> result ------------------------------------------------------
    #
    # No callback ever waits. A goal's task is submitted when the goal is accepted (or as soon
    # as its evidence cutoff record has arrived); the goal stays ACCEPTED while the task runs,
    # with feedback on every transition; when the task settles, the runner thread calls
    # ``goal_handle.execute()`` and the execute callback only sends the result. (Awaiting the
    # task in a coroutine instead leaves a pending rclpy task that the executor re-polls on
    # every wake-up; with a busy timeline subscription that measured as a busy loop and round
    # trips of up to 2 s.) Everything about a goal is read and changed under ``self._lock``.

    def _on_goal(self, goal: Delegate.Goal) -> GoalResponse:
        problem = ""
        if not self.active:
            problem = "the harness is not active (lifecycle)"
        elif not goal.query.strip():
            problem = "the query is empty"
        elif len(goal.query) > MAX_QUERY_CHARS:
            problem = f"the query has {len(goal.query)} characters (limit {MAX_QUERY_CHARS})"
        elif goal.session_id and goal.session_id != self.config.session_id:
            problem = (
                f"session {goal.session_id!r} is not the one served ({self.config.session_id!r})"
            )
        if problem:
            self.get_logger().warning(f"delegate goal rejected: {problem}")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _on_accepted(self, goal_handle: ServerGoalHandle) -> None:
        task_id = _task_id(goal_handle)
        cutoff = int(goal_handle.request.evidence_cutoff_seq)
        started = None
        with self._lock:
            goal = self._goals.accept(task_id, goal_handle, cutoff, self._mirror.last_seq)
            if goal.waiting:
                self._ensure_timer()
            else:
                started = self._submit(goal)
        self._watch(task_id, started)
        if goal.waiting:
            self._poll()  # the record may have arrived meanwhile

    def _on_cancel(self, goal_handle: ServerGoalHandle) -> CancelResponse:
        task_id = _task_id(goal_handle)
        started = None
        with self._lock:
            answer = self._goals.cancel(task_id)
            if answer is CancelAnswer.REJECT:  # settled: too late
                return CancelResponse.REJECT
            if answer is CancelAnswer.CANCEL_TASK:
                if not self._runner.cancel(task_id, "cancel requested by the client"):
                    return CancelResponse.REJECT
                self._goals.cancelling(task_id)
            elif answer is CancelAnswer.SUBMIT_CANCELLED:  # waited for evidence: start cancelled
                goal = self._goals.get(task_id)
                assert goal is not None
                started = self._submit(goal)
        self._watch(task_id, started)
        return CancelResponse.ACCEPT

    def _submit(self, goal: Goal) -> concurrent.futures.Future[Task] | None:
        """Hand the goal's task to the runner (caller holds the lock); its settle future."""
        task_id = goal.task_id
        request: Delegate.Goal = goal.handle.request
        try:
            self._runner.submit(
                request.query,
                request.session_id or self.config.session_id,
                request.turn_id,
                request.evidence_cutoff_seq,
                self._mirror.snapshot(request.evidence_cutoff_seq),
                task_id=task_id,
            )
        except RuntimeError as exc:  # the runner closed: shutting down
            self.get_logger().warning(f"task {task_id} not started: {exc}")
            return None
        self._goals.submitted(task_id)
        if goal.cancel:
            self._runner.cancel(task_id, "cancel requested by the client")
        return self._runner.future(task_id)

    def _watch(self, task_id: str, started: concurrent.futures.Future[Task] | None) -> None:
        """Have the result sent when the task settles (called without the lock)."""
        if started is not None:
            started.add_done_callback(lambda done: self._on_settled(task_id, done.result()))

    def _on_settled(self, task_id: str, task: Task) -> None:
        """The task's execution is over (runner thread): have its result sent."""
        with self._lock:
            if self._goals.get(task_id) is None:
                return
            # the action server records an accepted cancel just after our callback
            goal = self._goals.settled(task_id, task, self._cancel_recorded(task_id))
            if goal is None:
                self._ensure_timer()
                return
        self._send_result(goal)

    def _cancel_recorded(self, task_id: str) -> bool:
        goal = self._goals.get(task_id)
        return goal is not None and bool(goal.handle.is_cancel_requested)

    def _send_result(self, goal: Goal) -> None:
        try:
            goal.handle.execute()  # schedules self._result on the executor
        except Exception as exc:  # the context is gone: shutting down
            self.get_logger().debug(f"result not sent ({exc})")

    def _poll(self) -> None:
        """Start goals whose evidence arrived or whose wait is over; send held-back results."""
        last = self._mirror.last_seq
        started: list[tuple[str, concurrent.futures.Future[Task] | None]] = []
        offers: list[Task] = []
        listening = self._reply_pub.get_subscription_count() > 0
        with self._lock:
            if listening and self._offers:
                offers = list(self._offers.values())
                self._offers.clear()
            due = self._goals.due(last, lambda handle: bool(handle.is_cancel_requested))
            for goal in due.start:
                started.append((goal.task_id, self._submit(goal)))
            waiting = bool(self._offers) or self._goals.waiting
            if not waiting and self._timer is not None:
                # destroyed, not cancelled: a cancelled rclpy timer makes the executor spin
                self.destroy_timer(self._timer)
                self._timer = None
        for goal in due.incomplete:
            self.get_logger().warning(
                f"task {goal.task_id}: evidence incomplete, timeline at seq {last} "
                f"after {self.config.evidence_wait_s:g} s, cutoff {goal.cutoff_seq}"
            )
        for task_id, future in started:
            self._watch(task_id, future)
        for goal in due.results:
            self._send_result(goal)
        self._publish_offers(offers)

    def _ring(self) -> None:
        """Ring the timers that are due (each once), once a frontend listens."""
        if not self.context.ok() or self._reply_pub.get_subscription_count() == 0:
            return  # no one to hear it yet: it stays due and rings when one listens
        for job in self._schedule.due():
            self._reply_pub.publish(
                BackendReply(
                    header=Header(stamp=self.get_clock().now().to_msg()),
                    task_id=job.id,
                    session_id=job.session_id or self.config.session_id,
                    text=job.ring_text(),
                    topic="timer",
                )
            )
            self._job_event(job.id, TaskState.DELIVERING.value, f"{job.name} rang")

    def _job_event(self, job_id: str, state: str, reason: str) -> None:
        """A timeline record for a scheduled job's ring (tool ``timer``)."""
        record = self._events.append(
            Kind.TASK_STATE,
            {
                "source": "harness",
                "task_id": job_id,
                "state": state,
                "tool": "timer",
                "reason": reason,
                "job": True,
            },
        )
        self._timeline_pub.publish(record_to_msg(record))

    def _heartbeat(self) -> None:
        """Say the harness is alive, and every goal not settled yet is alive too (so the
        frontend waits for long work as long as it runs, and gives up when it goes silent)."""
        if not self.context.ok() or not self.active:
            return
        self._heartbeat_pub.publish(Header(stamp=self.get_clock().now().to_msg()))
        with self._lock:
            live = self._goals.live()
        for goal in live:
            task = self._runner.get(goal.task_id)
            state = task.state.value if task is not None else TaskState.QUEUED.value
            progress = float(task.progress) if task is not None else 0.0
            try:
                goal.handle.publish_feedback(
                    Delegate.Feedback(state=state, progress=progress, message="alive")
                )
            except Exception as exc:  # the goal just ended, or the context is going away
                self.get_logger().debug(f"heartbeat for {goal.task_id} not sent ({exc})")

    def _ensure_timer(self) -> None:
        """Poll while some goal waits (caller holds the lock)."""
        if self._timer is None:
            self._timer = self.create_timer(POLL_PERIOD_S, self._poll, callback_group=self._group)

    def _result(self, goal_handle: ServerGoalHandle) -> Delegate.Result:
        task_id = _task_id(goal_handle)
        with self._lock:
            goal = self._goals.pop(task_id)
        assert goal is not None and goal.task is not None
        task = goal.task
        final_state = task.state
        text = reply_text(task)
        if task.state is TaskState.COMPLETED:
            # The client has the reply: a restart must not repeat it; the frontend reports how
            # its delivery ends.
            self._runner.hand_off(task_id)
            if text.strip():
                self._runner.advance(task_id, TaskState.DELIVERING, "sent in the Delegate result")
            goal_handle.succeed()
        elif task.state is TaskState.CANCELLED and goal_handle.is_cancel_requested:
            goal_handle.canceled()
        else:
            goal_handle.abort()
        payload: dict[str, Any] = {
            "task_id": task.id,
            "tool": task.tool,
            "args": task.args,
            "result": task.payload,
        }
        if task.error:
            payload["error"] = task.error
        if task.note:
            payload["note"] = task.note
        return Delegate.Result(
            final_state=final_state.value,
            reply_text=text,
            payload_json=json.dumps(payload, allow_nan=False, default=str),
        )

    # --- transitions out (runner thread) -----------------------------------------------------

    def _ros_tool(self, name: str, entry: RosToolEntry) -> Tool:
        """Builds a ros_action / ros_service tool from its config entry, owned by this node."""
        from venus_ros.ros.tools import ros_tool_factory

        return ros_tool_factory(self, callback_group=self._group)(name, entry)

    def _publish_status(self, task: Task, message: str) -> bool:
        """Publish the task's status; False when the process is shutting down."""
        return self.while_up(
            self._status_pub.publish,
            TaskStatus(
                header=Header(stamp=self.get_clock().now().to_msg()),
                task_id=task.id,
                tool=task.tool,
                state=task.state.value,
                progress=float(task.progress),
                message=message,
            ),
        )

    def _on_progress(self, task: Task, fraction: float, message: str) -> None:
        """A running tool reported progress: task status and the goal's feedback."""
        if not self._publish_status(task, message):
            return  # the process is shutting down: nobody hears it
        with self._lock:
            goal = self._goals.get(task.id)
        if goal is not None:
            self.while_up(
                goal.handle.publish_feedback,
                Delegate.Feedback(state=task.state.value, progress=fraction, message=message),
            )

    def _on_transition(self, task: Task, old: TaskState | None, new: TaskState) -> None:
        reason = task.reason
        if not self._publish_status(task, reason):
            return  # the process is shutting down (the journal has the transition)
        record = self._events.append(
            Kind.TASK_STATE,
            {
                "source": "harness",
                "task_id": task.id,
                "state": new.value,
                "previous": old.value if old else None,
                "tool": task.tool,
                "reason": reason,
                "turn": task.turn_id,
                "cutoff_seq": task.cutoff_seq,
            },
        )
        self.while_up(self._timeline_pub.publish, record_to_msg(record))
        with self._lock:
            goal = self._goals.get(task.id)
        if goal is not None:
            self.while_up(
                goal.handle.publish_feedback,
                Delegate.Feedback(state=new.value, progress=float(task.progress), message=reason),
            )
        elif new is TaskState.COMPLETED and old is not TaskState.COMPLETED:
            self._offer(task)  # a recovered task finished: no goal waits for its reply


#: The states a frontend's delivery report may move a task to.
_DELIVERY_ENDS = frozenset({TaskState.DELIVERED, TaskState.FAILED, TaskState.CANCELLED})


def _task_id(goal_handle: ServerGoalHandle) -> str:
    return bytes(goal_handle.goal_id.uuid).hex()


class _RosLogHandler(logging.Handler):
    """Sends the pure harness package's log records to the node's ROS logger."""

    def __init__(self, node: Node) -> None:
        super().__init__()
        self._logger = node.get_logger()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
            if record.levelno >= logging.ERROR:
                self._logger.error(text)
            elif record.levelno >= logging.WARNING:
                self._logger.warning(text)
            else:
                self._logger.info(text)
        except Exception:
            self.handleError(record)


def _forward_logs(node: Node) -> None:
    logger = logging.getLogger("venus_ros.harness")
    if not any(isinstance(h, _RosLogHandler) for h in logger.handlers):
        logger.addHandler(_RosLogHandler(node))
        logger.setLevel(logging.INFO)


def main(argv: Sequence[str] | None = None) -> int:
    """Run harness_node until Ctrl-C (exit 0), or exit 2 on a configuration error."""
    return run_node(HarnessNode, argv)


if __name__ == "__main__":
    sys.exit(main())
