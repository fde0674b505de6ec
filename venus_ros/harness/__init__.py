"""The background loop (the Harness): delegated tasks, their lifecycle, tools and polishing.

Pure Python: nothing here imports rclpy (``tests/test_layers.py`` enforces it, with no
exception). The ROS action and service tools live with the ROS glue (:mod:`venus_ros.ros.tools`),
and the ROS action server that feeds the runner in :mod:`venus_ros.nodes.harness`.

- :mod:`.tasks`: :class:`~.tasks.Task` and the lifecycle of its :class:`~.tasks.TaskState`.
- :mod:`.tools`: :class:`~.tools.Tool`, the built-in tools, :class:`~.tools.ToolRegistry` and
  the keyword :func:`~.tools.route`.
- :mod:`.runner`: :class:`~.runner.HarnessRunner`, an asyncio loop in its own thread.
- :mod:`.lifecycle`: the runner's task table and every state move (journal, then memory, then
  listeners).
- :mod:`.takeback`: cancelling, cancel requests ("never mind") and superseding requests.
- :mod:`.recovery`: after a restart, the journal's unfinished tasks re-run, failed or re-adopted.
- :mod:`.schedule`: timers and reminders as scheduled jobs in the journal's file.
- :mod:`.evidence`: :class:`~.evidence.EvidenceMirror`, a timeline copy keyed by the original seq.
- :mod:`.polish`: a tool result made into a short, safe, spoken reply.
- :mod:`.toolconfig`: ``config/tools.yaml``: which tools exist, their schemas, which run.
- :mod:`.llm`: the chat-completions client (official ``openai`` SDK, streamed replies), the
  planning loop and LLM polishing.
- :mod:`.journal`: the crash-safe task journal (SQLite, WAL) and ``venus-ros tasks`` listing.
- :mod:`.progress`: how a running tool reports progress (a context variable per tool task).
"""
