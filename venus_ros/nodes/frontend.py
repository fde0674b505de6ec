"""frontend_node: the foreground loop as a ROS 2 node.

Subscriptions feed a thread-safe UnitAssembler; the duplex loop runs on its own thread (never on
the executor), one step per completed unit; results go out as speech, decisions, transcript and
timeline events. Between boundaries the same thread gives a frontend that hears audio early
(:attr:`~venus_ros.core.frontend.Frontend.hears_audio`) the unit in progress as it arrives; when
it stops the assistant there, a ``UnitDecision`` with ``flush`` (for the last unit decided) goes
to the speaker at once, and the boundary that follows yields without a second flush.
Delegations become Delegate action goals; their replies come back as backend
replies that the loop inserts at an eligible boundary. How each reply's delivery ends (played,
dropped, withdrawn) goes back to the harness on ``delivery``; a task that ends CANCELLED on
``task_status`` (the user cancelled, or a newer request superseded it) has its reply withdrawn.
A dead harness costs nothing but the delegation: pending goals are reported failed on the
timeline and the loop keeps deciding. Which delegations are still awaited, given up or late is
decided by :class:`~venus_ros.core.delegation.DelegationTracker` (rules there): long work stays
awaited while the harness keeps reporting it, a result that comes after the frontend gave up is
still offered while fresh, and a stale one is reported dropped so the harness journals it.

A lifecycle node (:class:`~venus_ros.nodes.managed.ManagedNode`): configure builds the frontend
(loads its models) and prepares the loop, activate starts the foreground thread and accepts
audio and frames, deactivate stops both (inputs meanwhile are dropped), cleanup releases the
frontend. Camera frames come from ``camera/image_raw`` (``image_transport: raw``) or its
``/compressed`` JPEG/PNG topic (``image_transport: compressed``), with sensor-data QoS.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus
from rclpy.action import ActionClient
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.subscription import Subscription
from rclpy.task import Future
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import Header, String
from unique_identifier_msgs.msg import UUID

from venus_interfaces.action import Delegate
from venus_interfaces.msg import (
    AudioChunk,
    BackendReply as BackendReplyMsg,
    PlaybackAck as PlaybackAckMsg,
    TaskStatus,
    TimelineEvent,
    UnitDecision,
)
from venus_ros.core.clock import MonotonicClock
from venus_ros.core.delegation import DelegationTracker, GiveUp, Verdict
from venus_ros.core.delivery import DeliveryOutcome, Outcome
from venus_ros.core.duplex import (
    BackendReply,
    DelegateRequest,
    DuplexConfig,
    DuplexLoop,
    UnitResult,
)
from venus_ros.core.frontend import Frontend
from venus_ros.core.timeline import Kind, Timeline
from venus_ros.core.units import InputError, UnitAssembler, UnitConfig, VideoFrame
from venus_ros.frontends import make_frontend, resolve_spec
from venus_ros.nodes import convert
from venus_ros.nodes.diagnostics import NodeDiagnostics
from venus_ros.nodes.managed import ManagedNode
from venus_ros.nodes.params import declare_config, reject_unknown_overrides, tunable
from venus_ros.nodes.qos import TOPICS, qos_for
from venus_ros.nodes.runtime import run_node

#: Timeline records published per batch, so one burst cannot stall the loop thread.
_PUBLISH_BATCH = 500
SERVER_SETTLE_S = 1.0
"""How long the harness's action server must have been known before goals are sent to it
(delegations made before are kept and sent then): DDS matches the two sides of a service one
after the other, and a request sent in between is lost."""


@dataclass(frozen=True)
class FrontendNodeConfig:
    """Parameters of frontend_node."""

    frontend: str = field(
        default="", metadata={"help": "frontend spec, e.g. cascade:aec ('' = cascade)"}
    )
    system_prompt: str = field(default="", metadata={"help": "passed to Frontend.prepare"})
    session_id: str = field(default="default", metadata={"help": "sent with every delegation"})
    timeline_window_s: float = field(default=600.0, metadata={"help": "timeline retention, s"})
    delegate_timeout_s: float = field(
        default=10.0,
        metadata={
            "help": "a delegation the harness says nothing about (no accept, feedback or "
            "per-task heartbeat) for this long is given up and its goal cancelled, s"
        },
    )
    late_result_max_s: float = field(
        default=120.0,
        metadata={
            "help": "a result arriving this long at most after its delegation was given up is "
            "still offered; later ones are dropped as stale (and reported so), s"
        },
    )
    harness_timeout_s: float = tunable(
        2.0, "no harness heartbeat for this long: harness is down, s", 0.1, 60.0
    )
    image_transport: str = field(
        default="raw",
        metadata={"help": "camera frames from camera/image_raw (raw) or its /compressed topic"},
    )
    speech_frame_id: str = field(
        default="speaker_link", metadata={"help": "header.frame_id of audio/out (the speaker)"}
    )
    units: UnitConfig = field(default_factory=UnitConfig)
    duplex: DuplexConfig = field(default_factory=DuplexConfig)

    def __post_init__(self) -> None:
        if self.delegate_timeout_s <= 0:
            raise ValueError("delegate_timeout_s must be > 0")
        if self.harness_timeout_s <= 0:
            raise ValueError("harness_timeout_s must be > 0")
        if self.late_result_max_s < 0:
            raise ValueError("late_result_max_s must be >= 0")
        if self.image_transport not in ("raw", "compressed"):
            raise ValueError(
                f"image_transport must be raw or compressed, not {self.image_transport!r}"
            )


class FrontendNode(ManagedNode):
    """Runs the duplex loop over live topics while active.

    Args:
        node_name: the node's name.
        **kwargs: :class:`rclpy.node.Node` keyword arguments (``context``,
            ``parameter_overrides``...), so several nodes can share a process.
    """

    def __init__(self, node_name: str = "frontend_node", **kwargs: object) -> None:
        super().__init__(node_name, **kwargs)
        self.config = declare_config(self, FrontendNodeConfig)
        reject_unknown_overrides(self, kwargs.get("parameter_overrides"))  # type: ignore[arg-type]
        cfg = self.config
        self.clock = MonotonicClock()
        self.timeline = Timeline(self.clock, window_s=cfg.timeline_window_s)
        self.spec = resolve_spec(cfg.frontend)
        self.frontend: Frontend | None = None
        self.loop: DuplexLoop | None = None
        self.units_done = 0
        #: Times the frontend stopped the assistant between boundaries (:meth:`_hear`).
        self.early_flushes = 0
        #: Turns the frontend started between boundaries (:meth:`_hear`).
        self.early_starts = 0
        self._last_unit = -1
        self._heard = 0  # samples of the unit in progress already given to the loop
        self.assembler = UnitAssembler(cfg.units)
        self.dropped_messages = 0
        self.lost_samples = 0
        self._expected_sample: int | None = None
        self._frame_seq = 0
        self._published_seq = 0
        self._publish_lock = threading.Lock()
        self.delegations = DelegationTracker(
            self.clock,
            liveness_s=cfg.delegate_timeout_s,
            late_result_max_s=cfg.late_result_max_s,
        )
        self._wake = threading.Condition()
        self._stop = False
        self._thread: threading.Thread | None = None

        group = ReentrantCallbackGroup()
        self.pub_audio = self.create_publisher(
            AudioChunk, TOPICS["audio_out"], qos_for("audio_out")
        )
        self.pub_decision = self.create_publisher(
            UnitDecision, TOPICS["decision"], qos_for("decision")
        )
        self.pub_transcript = self.create_publisher(
            String, TOPICS["transcript"], qos_for("transcript")
        )
        self.pub_timeline = self.create_publisher(
            TimelineEvent, TOPICS["timeline"], qos_for("timeline")
        )
        self.pub_delivery = self.create_publisher(
            TaskStatus, TOPICS["delivery"], qos_for("delivery")
        )
        self.create_subscription(
            TaskStatus,
            TOPICS["task_status"],
            self._on_task_status,
            qos_for("task_status"),
            callback_group=group,
        )
        self._group = group
        self._inputs: list[Subscription] = []  # audio and camera: only while active
        self.create_subscription(
            PlaybackAckMsg, TOPICS["played"], self._on_ack, qos_for("played"), callback_group=group
        )
        self.create_subscription(
            BackendReplyMsg,
            TOPICS["backend_reply"],
            self._on_backend,
            qos_for("backend_reply"),
            callback_group=group,
        )
        self.delegate = ActionClient(self, Delegate, TOPICS["delegate"], callback_group=group)
        self._heartbeat_at: float | None = None
        self._server_seen_at: float | None = None  # when the action server was first known
        #: Delegations made while the harness was not reachable (it starts, restarts, or is
        #: still being discovered): ``(task id, request, session time)``, sent once it is.
        self._unsent: list[tuple[str, DelegateRequest, float]] = []
        self._unsent_lock = threading.Lock()
        self.create_subscription(
            Header,
            TOPICS["heartbeat"],
            self._on_heartbeat,
            qos_for("heartbeat"),
            callback_group=group,
        )
        self.create_timer(0.2, self._housekeeping, callback_group=group)
        self._diagnostics = NodeDiagnostics(
            self, "foreground loop", self._diagnose, rate_keys=("units",)
        )

    # ------------------------------------------------------------------ lifecycle
    def setup(self) -> None:
        """Build the frontend (its models load here) and prepare the loop."""
        self.frontend = make_frontend(self.spec, clock=self.clock)
        self.loop = DuplexLoop(
            self.frontend,
            self.timeline,
            self.clock,
            self.config.duplex,
            on_delivery=self._on_delivery,
        )
        self.loop.prepare(system_prompt=self.config.system_prompt)
        self.get_logger().info(
            f"frontend {self.spec} ready; units of {self.config.units.unit_ms} ms"
        )

    def start(self) -> None:
        """Subscribe to audio and frames and start the foreground thread.

        The input subscriptions exist only while active: a file microphone starts playing when
        it sees its subscriber, so nothing is played to a frontend still loading its models.
        """
        group, cfg = self._group, self.config
        self._inputs.append(
            self.create_subscription(
                AudioChunk,
                TOPICS["audio_in"],
                self._on_audio,
                qos_for("audio_in"),
                callback_group=group,
            )
        )
        if cfg.image_transport == "compressed":
            frames = self.create_subscription(
                CompressedImage,
                TOPICS["image_compressed"],
                self._on_compressed,
                qos_for("image_compressed"),
                callback_group=group,
            )
        else:
            frames = self.create_subscription(
                Image, TOPICS["image"], self._on_image, qos_for("image"), callback_group=group
            )
        self._inputs.append(frames)
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="venus-foreground", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the foreground thread (the frontend stays loaded)."""
        with self._wake:
            self._stop = True
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None
        for subscription in self._inputs:
            self.destroy_subscription(subscription)
        self._inputs.clear()
        self._expected_sample = None  # the stream restarts: no gap to fill

    def teardown(self) -> None:
        """Release the frontend."""
        if self.frontend is not None:
            self.frontend.close()
        self.frontend = self.loop = None

    # ------------------------------------------------------------------ inputs (executor)
    def _on_audio(self, msg: AudioChunk) -> None:
        if not self.active:
            return
        try:
            samples, rate = convert.audio_from_msg(msg)
            self._fill_gap(int(msg.first_sample), len(samples), rate)
            self.assembler.push_audio(samples, rate)
        except InputError as exc:
            self._reject(exc)
            return
        with self._wake:
            self._wake.notify()

    def _fill_gap(self, first: int, count: int, rate: int) -> None:
        """Lost chunks become silence of the same length, so unit times stay true."""
        expected = self._expected_sample
        if expected is not None and first + rate <= expected:
            # A second or more behind: the microphone restarted (a new stream counts from 0),
            # not a repeat; follow the new stream rather than refuse it forever.
            self.get_logger().warning(
                f"audio restarted at sample {first} (expected {expected}): a new microphone"
            )
            expected = None
        if expected is not None and first < expected:
            raise InputError("audio.first_sample", f"{first} repeats audio before {expected}")
        if expected is not None and first > expected:
            gap = first - expected
            self.lost_samples += gap
            self.assembler.push_audio(np.zeros(gap, np.float32), rate)
        self._expected_sample = first + count

    def _on_image(self, msg: Image) -> None:
        self._push_frame(convert.frame_from_msg, msg)

    def _on_compressed(self, msg: CompressedImage) -> None:
        self._push_frame(convert.frame_from_compressed, msg)

    def _push_frame(self, decode: Callable[[Any, float, int], VideoFrame], msg: Any) -> None:
        if not self.active:
            return
        try:
            self._frame_seq += 1
            self.assembler.push_frame(decode(msg, self.clock.now(), self._frame_seq))
        except InputError as exc:
            self._reject(exc)

    def _on_ack(self, msg: PlaybackAckMsg) -> None:
        if self.loop is not None:
            self.loop.acknowledge(convert.ack_from_msg(msg))

    def _on_backend(self, msg: BackendReplyMsg) -> None:
        if not msg.text.strip():
            self._reject(InputError("backend_reply.text", "empty reply"))
            return
        if self.loop is not None:
            self.loop.offer_backend(BackendReply(msg.task_id, msg.text, topic=msg.topic))

    def _on_task_status(self, msg: TaskStatus) -> None:
        if msg.state == TaskStatus.CANCELLED and self.loop is not None:
            self.loop.withdraw_backend(msg.task_id, msg.message or "cancelled")

    def _on_delivery(self, outcome: DeliveryOutcome) -> None:
        """Tell the harness how a reply's delivery ended (re-offers stay here)."""
        state = _DELIVERY_STATES.get(outcome.outcome)
        if state is None:
            return
        self._report(outcome.task_id, state, f"{outcome.outcome.value}: {outcome.reason}")

    def _report(self, task_id: str, state: str, message: str) -> None:
        """Tell the harness how a task's reply ended (it journals it)."""
        self.pub_delivery.publish(
            TaskStatus(
                header=Header(stamp=self.get_clock().now().to_msg()),
                task_id=task_id,
                state=state,
                progress=1.0,
                message=message,
            )
        )

    def _on_heartbeat(self, msg: Header) -> None:
        self._heartbeat_at = self.clock.now()

    def _harness_up(self) -> bool:
        """The action server is known, has been for :data:`SERVER_SETTLE_S`, and its heartbeat
        is recent. (A server just discovered may not have matched this client's requests
        yet: a goal sent then can be lost without an answer.)"""
        now = self.clock.now()
        beat = self._heartbeat_at
        fresh = beat is not None and now - beat < self.config.harness_timeout_s
        if not self.delegate.server_is_ready():
            self._server_seen_at = None
            return False
        if self._server_seen_at is None:
            self._server_seen_at = now
        return fresh and now - self._server_seen_at >= SERVER_SETTLE_S

    def _reject(self, exc: InputError) -> None:
        self.dropped_messages += 1
        self.timeline.append(Kind.INPUT_ERROR, {"field": exc.field, "message": str(exc)})
        self.get_logger().warning(
            f"dropped input ({self.dropped_messages} so far): {exc}", throttle_duration_sec=5.0
        )

    # ------------------------------------------------------------------ foreground thread
    def _run(self) -> None:
        loop = self.loop
        if loop is None:
            return
        hears = loop.hears_audio
        seen = -1  # the assembler's sample count when the unit in progress was last heard
        while True:
            with self._wake:
                unit = self.assembler.pop_unit()
                while (
                    unit is None
                    and not self._stop
                    and not (hears and self.assembler.samples_in != seen)
                ):
                    self._wake.wait(timeout=0.1)
                    unit = self.assembler.pop_unit()
                if self._stop:
                    return
            if unit is None:
                seen = self.assembler.samples_in
                self._hear(loop)
                continue
            result = loop.step(unit)
            self._heard = 0  # the next unit is heard from its start
            self.units_done += 1
            self._last_unit = unit.index
            stamp = self.get_clock().now().to_msg()
            self.pub_decision.publish(convert.decision_to_msg(result, unit.duration_s, stamp))
            self._send(result, stamp)

    def _send(self, result: UnitResult, stamp: Any) -> None:
        """Publish a result's speech and transcript, then the timeline, then its delegates."""
        if result.speech is not None:
            speech = result.speech
            self.pub_audio.publish(
                convert.audio_to_msg(
                    speech.audio,
                    speech.sample_rate,
                    speech.first_sample,
                    stamp,
                    frame_id=self.config.speech_frame_id,
                    unit_index=speech.unit_index,
                )
            )
            if speech.text:
                self.pub_transcript.publish(String(data=speech.text))
        self._publish_timeline()  # the harness needs the records up to the cutoff first
        for request in result.delegates:
            self._send_goal(request)

    def _hear(self, loop: DuplexLoop) -> None:
        """Give the frontend the new audio of the unit in progress; stop the speaker at once if
        it asks (a UnitDecision with ``flush`` for the last unit decided, as a yield sends), or
        start a turn at once (a UnitDecision ``speak`` for the last unit decided, and its
        speech)."""
        piece = self.assembler.partial(self._heard)  # only what the loop has not heard
        # A unit completed meanwhile: its boundary comes first (the piece is of the next one).
        if piece is None or self.assembler.pending_units:
            return
        self._heard = piece.end
        duration = piece.length / piece.sample_rate
        if loop.hear(piece):
            self.early_flushes += 1
            msg = UnitDecision()
            msg.header = Header(stamp=self.get_clock().now().to_msg())
            msg.unit_index = max(self._last_unit, 0)
            msg.decision = UnitDecision.SPEAK
            msg.end_of_turn = False
            msg.flush = True
            msg.realtime_debt = float(loop.debt_s)
            msg.unit_duration = float(duration)
            self.pub_decision.publish(msg)
            self._publish_timeline()
        started = loop.speak_now(piece)
        if started is not None:
            self.early_starts += 1
            stamp = self.get_clock().now().to_msg()
            self.pub_decision.publish(convert.decision_to_msg(started, duration, stamp))
            self._send(started, stamp)

    # ------------------------------------------------------------------ delegation
    def _send_goal(self, request: DelegateRequest) -> None:
        """Send a delegation, or, while the harness is not reachable, keep it to send when it
        is (:meth:`_send_unsent`): a request made while the harness starts or is still being
        discovered is not lost."""
        task_id = uuid.uuid4().hex  # the harness names the task by the goal id too
        with self._unsent_lock:
            keep = bool(self._unsent) or not self._harness_up()  # (in the order they came)
            if keep:
                self._task_state(task_id, "QUEUED", "waiting for the harness", request.query)
                self._unsent.append((task_id, request, self.clock.now()))
        if not keep:
            self._dispatch(task_id, request)

    def _send_unsent(self) -> None:
        """Send the delegations kept while the harness was not reachable, now that it is; give
        up those kept for ``delegate_timeout_s`` (``harness_unavailable``)."""
        with self._unsent_lock:
            if not self._unsent:
                return
            if self._harness_up():
                send, failed, self._unsent = self._unsent, [], []
            else:
                since = self.clock.now() - self.config.delegate_timeout_s
                send = []
                failed = [u for u in self._unsent if u[2] < since]
                self._unsent = [u for u in self._unsent if u[2] >= since]
        for task_id, request, _ in send:
            self._dispatch(task_id, request)
        for task_id, request, _ in failed:
            self._task_state(task_id, "FAILED", "harness_unavailable", request.query)

    def _dispatch(self, task_id: str, request: DelegateRequest) -> None:
        goal_id = uuid.UUID(hex=task_id)
        goal = Delegate.Goal(
            query=request.query,
            session_id=self.config.session_id,
            turn_id=request.turn_id,
            evidence_cutoff_seq=request.cutoff_seq,
        )
        self.delegations.send(task_id, request.query, request.turn_id, request.cutoff_seq)
        self._task_state(task_id, "QUEUED", "sent", request.query)
        future = self.delegate.send_goal_async(
            goal,
            feedback_callback=lambda _: self.delegations.heard(task_id),
            goal_uuid=UUID(uuid=list(goal_id.bytes)),
        )
        future.add_done_callback(lambda f: self._on_goal_response(task_id, f))

    def _on_goal_response(self, task_id: str, future: Future) -> None:
        if future.exception() is not None:
            self._end(task_id, f"sending the goal failed: {future.exception()}")
            return
        handle = future.result()
        if handle is None or not handle.accepted:
            self._end(task_id, "rejected by the harness")
            return
        if not self.delegations.accepted(task_id, handle):
            handle.cancel_goal_async()  # given up before the accept came: stop it there too
        handle.get_result_async().add_done_callback(lambda f: self._on_result(task_id, f))

    def _on_result(self, task_id: str, future: Future) -> None:
        if future.exception() is not None or future.result() is None:
            if self.delegations.end(task_id) is not None:
                reason = f"no result from the harness: {future.exception()}"
                self._task_state(task_id, "FAILED", reason, "")
            return
        result = future.result().result
        state = result.final_state or "FAILED"
        text = result.reply_text
        decision = self.delegations.result(task_id, state, bool(text.strip()))
        verdict = decision.verdict
        if verdict is Verdict.DUPLICATE:
            return
        if verdict in (Verdict.OFFER, Verdict.END):
            self._task_state(task_id, state, "harness result", decision.query)
        elif verdict is Verdict.LATE_OFFER:
            reason = f"late result ({decision.late_s:.1f} s after giving up): offered"
            self._task_state(task_id, state, reason, decision.query)
        elif verdict is Verdict.LATE_DROP:
            reason = (
                f"stale: late result {decision.late_s:.0f} s after giving up "
                f"(limit {self.config.late_result_max_s:g} s), dropped"
            )
            self._task_state(task_id, "FAILED", reason, decision.query)
            self._report(task_id, TaskStatus.FAILED, f"dropped: {reason}")
        else:  # LATE_END: nothing to say
            self._task_state(task_id, state, "late result, nothing to say", decision.query)
        if decision.offer and self.loop is not None:
            self.loop.offer_backend(
                BackendReply(task_id, text, topic=_tool_of(result.payload_json))
            )

    def _end(self, task_id: str, reason: str) -> None:
        """A delegation that ends without a result (not sent, rejected)."""
        delegation = self.delegations.end(task_id)
        if delegation is not None:
            self._task_state(task_id, "FAILED", reason, delegation.query)

    def _task_state(self, task_id: str, state: str, reason: str, query: str) -> None:
        self.timeline.append(
            Kind.TASK_STATE,
            {
                "task_id": task_id,
                "state": state,
                "reason": reason,
                "query": query[:200],
                "source": "frontend",
            },
        )

    def _give_up(self, give_up: GiveUp) -> None:
        delegation = give_up.delegation
        self._task_state(delegation.task_id, "FAILED", give_up.reason, delegation.query)
        if give_up.cancel and delegation.handle is not None:
            delegation.handle.cancel_goal_async()

    def _housekeeping(self) -> None:
        """Give up delegations the harness stopped reporting; flush timeline records."""
        self._send_unsent()
        for give_up in self.delegations.expire(self._harness_up(), self._heartbeat_at):
            self._give_up(give_up)
        self._publish_timeline()

    def _publish_timeline(self) -> None:
        with self._publish_lock:
            while records := self.timeline.records_after(self._published_seq, _PUBLISH_BATCH):
                for record in records:
                    self.pub_timeline.publish(convert.record_to_msg(record))
                self._published_seq = records[-1].seq

    def diagnostics(self) -> dict[str, str]:
        """Counters for tests and logs."""
        return {
            "dropped_messages": str(self.dropped_messages),
            "lost_samples": str(self.lost_samples),
            "dropped_units": str(self.assembler.dropped_units),
            "missed_units": str(self.loop.missed_units if self.loop is not None else 0),
            "early_flushes": str(self.early_flushes),
            "early_starts": str(self.early_starts),
            "pending_delegations": json.dumps(self.delegations.pending()),
            "delegations_waiting_for_harness": str(len(self._unsent)),
        }

    def _diagnose(self) -> tuple[bytes, str, dict[str, str]]:
        values = self.diagnostics() | {"frontend": str(self.spec), "units": str(self.units_done)}
        if not self.active:
            return DiagnosticStatus.OK, "inactive", values
        if not self._harness_up():
            return DiagnosticStatus.WARN, "running; the harness is not reachable", values
        return DiagnosticStatus.OK, "running", values


#: Delivery outcomes the harness hears about, as the task state they lead to.
_DELIVERY_STATES = {
    Outcome.DELIVERED: TaskStatus.DELIVERED,
    Outcome.DROPPED: TaskStatus.FAILED,
    Outcome.WITHDRAWN: TaskStatus.CANCELLED,
}


def _tool_of(payload_json: str) -> str:
    """The tool named in a Delegate result's payload ("" if there is none)."""
    try:
        payload = json.loads(payload_json)
    except ValueError:
        return ""
    tool = payload.get("tool") if isinstance(payload, dict) else None
    return tool if isinstance(tool, str) else ""


def main(argv: list[str] | None = None) -> int:
    """Console script ``frontend_node``."""
    return run_node(FrontendNode, argv)


if __name__ == "__main__":
    raise SystemExit(main())
