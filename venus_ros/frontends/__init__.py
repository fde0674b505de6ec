"""Frontend implementations, chosen by a spec string such as ``scripted:FILE``.

- ``cascade[:OPTIONS]`` (the default, :data:`DEFAULT_FRONTEND`): the embedded cascade
  (:mod:`.cascade.frontend`): the speech stack around the trained floor policy, the delegation
  router and local template replies; options as the baselines' plus
  ``policy=trained|vad-bargein|never-yield`` and ``router=trained|all``.
- ``floor[:OPTIONS]``: the trained floor policy (:mod:`.cascade.floor`) alone in the baselines'
  speech stack (delegating every request, like them), to measure it against them; options
  ``asr``/``noasr``, ``partials``/``nopartials`` (on), ``aec``/``noaec``, ``notext``,
  ``tts=ENGINE``, ``model=PATH``, ``yield=P``, ``start=P``.
- ``venus:PATH[,OPTION...]``: a local Realtime-Venus-Omni/-Audio or MiniCPM-o 4.5 checkpoint
  through transformers (:mod:`.venus`; bf16 on CUDA, fp32 on CPU); options ``device=``,
  ``dtype=``, ``attn=``, ``variant=omni|audio``, ``speak_tokens=N``, ``decode=``,
  ``ref_audio=WAV``, ``versions=check|ignore`` (docs/gpu.md).
- ``remote:URL[,OPTION...]``: the duplex model on another machine (:mod:`.remote`), over the
  MiniCPM-o Realtime protocol (``venus-ros serve``, a hosted MiniCPM-o) or vLLM-omni's
  ``/v1/realtime?duplex=1``; options ``deadline_ms=``, ``fallback=SPEC``, ``token_env=``,
  ``protocol=minicpmo|vllm`` ... (docs/serving.md).
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
NAMES = ("cascade", "floor", "scripted", "vad-bargein", "never-yield", "venus", "remote")

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
    if name == "venus":
        from venus_ros.frontends.venus import make_venus_frontend

        return make_venus_frontend(argument)
    if name == "remote":
        if not argument:
            raise FrontendError("frontend 'remote' needs a server URL: remote:ws://HOST:PORT")
        from venus_ros.frontends.remote import make_remote_frontend

        return make_remote_frontend(argument, clock=clock)
    if name in ("vad-bargein", "never-yield"):
        from venus_ros.frontends.policy import make_policy_frontend

        return make_policy_frontend(name, argument)
    raise FrontendError(f"unknown frontend {name!r}; choose one of {', '.join(NAMES)}")
