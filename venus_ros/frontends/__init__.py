"""Frontend implementations, chosen by a spec string such as ``scripted:FILE``.

- ``cascade[:OPTIONS]`` (the default, :data:`DEFAULT_FRONTEND`): the embedded cascade
  (:mod:`.cascade.frontend`): the speech stack around the trained floor policy, the delegation
  router and local template replies; options as the baselines' plus
  ``policy=trained|vad-bargein|never-yield`` and ``router=trained|all``.
- ``floor[:OPTIONS]``: the trained floor policy (:mod:`.cascade.floor`) alone in the baselines'
  speech stack (delegating every request, like them), to measure it against them; options
  ``asr``/``noasr``, ``partials``/``nopartials`` (on), ``aec``/``noaec``, ``notext``,
  ``tts=ENGINE``, ``model=PATH``, ``yield=P``, ``start=P``.
- ``scripted:FILE``: a YAML script (:mod:`.scripted`), for tests and samples.
- ``vad-bargein[:OPTIONS]`` and ``never-yield[:OPTIONS]``: the evaluation baselines, real speech
  stacks (AEC, Silero VAD, Whisper, espeak-ng) around a floor policy (:mod:`.policy`); options
  ``asr``/``noasr`` (on), ``aec``/``noaec`` (off; on where the mic hears the speaker),
  ``partials``, ``tts=ENGINE``, ``substeps=N``.

Each implementation is imported only when chosen, so heavy libraries load only where needed.
"""

from __future__ import annotations

from venus_ros.core.clock import Clock
from venus_ros.core.frontend import Frontend, FrontendError

#: Frontend names accepted by :func:`make_frontend`.
NAMES = ("cascade", "floor", "scripted", "vad-bargein", "never-yield")

#: The frontend used where none is named (``frontend_node`` with ``frontend: ""``).
DEFAULT_FRONTEND = "cascade"


def resolve_spec(spec: str) -> str:
    """``spec``, or :data:`DEFAULT_FRONTEND` when it is empty."""
    return spec.strip() or DEFAULT_FRONTEND


def make_frontend(spec: str, clock: Clock | None = None) -> Frontend:
    """Build a frontend from ``NAME[:ARGUMENT]``.

    Args:
        spec: e.g. ``scripted:config/samples/hello/script.yaml``; empty: the default
            (:data:`DEFAULT_FRONTEND`).
        clock: the session clock, for frontends that simulate compute time.

    Raises:
        FrontendError: for an unknown name or a missing argument.
    """
    name, _, argument = resolve_spec(spec).partition(":")
    if name == "cascade":
        from venus_ros.frontends.cascade.frontend import make_cascade_frontend

        return make_cascade_frontend(argument)
    if name == "floor":
        from venus_ros.frontends.cascade.floor import make_floor_frontend

        return make_floor_frontend(argument)
    if name == "scripted":
        if not argument:
            raise FrontendError("frontend 'scripted' needs a script file: scripted:FILE")
        from venus_ros.frontends.scripted import ScriptedFrontend, load_script

        return ScriptedFrontend(load_script(argument), clock=clock)
    if name in ("vad-bargein", "never-yield"):
        from venus_ros.frontends.policy import make_policy_frontend

        return make_policy_frontend(name, argument)
    raise FrontendError(f"unknown frontend {name!r}; choose one of {', '.join(NAMES)}")
