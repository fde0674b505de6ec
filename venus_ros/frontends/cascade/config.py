"""Typed options of the cascade frontend, and the ``cascade:OPTION,...`` spec that fills them.

:class:`CascadeConfig` is what :func:`~venus_ros.frontends.cascade.frontend.build_cascade`
takes; :func:`parse_spec` is the thin front for the command line and ROS parameter strings
(``venus-ros eval run --frontend cascade:aec,lm=none``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal

from venus_ros.core.frontend import FrontendError
from venus_ros.frontends.cascade.responder import LmConfig
from venus_ros.frontends.policy import parse_options

__all__ = ["CascadeConfig", "parse_spec"]

Policy = Literal["trained", "vad-bargein", "never-yield"]
Router = Literal["trained", "all"]


@dataclass(frozen=True)
class CascadeConfig:
    """Everything the cascade frontend is built from.

    Attributes:
        policy: Floor policy: ``"trained"`` or a baseline (``"vad-bargein"``, ``"never-yield"``).
        floor_model: The trained policy's ONNX file (None: the committed model).
        router: Delegation router: ``"trained"`` or ``"all"`` (delegate every request).
        asr: Whisper transcripts of the user's utterances.
        asr_partials: Partial transcripts every step (None: what the floor policy asks for).
        aec: Echo cancellation (on wherever the microphone hears the speaker).
        tts: TTS engine (``espeak``, ``piper``, ``auto``).
        substeps: Floor decisions per unit (None: what the floor policy asks for, else 1).
        lm: The responder's language model.
        tools: Tool file whose enabled tools say what the assistant can do (None: the
            package's ``config/tools.yaml``).
        name: The assistant's name.
    """

    policy: Policy = "trained"
    floor_model: str | None = None
    router: Router = "trained"
    asr: bool = True
    asr_partials: bool | None = None
    aec: bool = False
    tts: str = "espeak"
    substeps: int | None = None
    lm: LmConfig = field(default_factory=LmConfig)
    tools: str | None = None
    name: str = "Venus"

    def __post_init__(self) -> None:
        if self.policy not in ("trained", "vad-bargein", "never-yield"):
            raise FrontendError(
                f"cascade: unknown policy {self.policy!r}; choose trained, vad-bargein or "
                "never-yield"
            )
        if self.router not in ("trained", "all"):
            raise FrontendError(f"cascade: unknown router {self.router!r}; choose trained or all")
        if self.asr_partials and not self.asr:
            raise FrontendError("frontend 'cascade': 'partials' needs ASR (drop 'noasr')")
        if self.lm.kind != "none" and not self.asr:
            # without transcripts there is nothing to answer in content
            object.__setattr__(self, "lm", LmConfig(kind="none"))


_LM_KEYS = {
    "lm": ("kind", str),
    "lm_model": ("model", str),
    "lm_url": ("base_url", str),
    "lm_key_env": ("api_key_env", str),
    "lm_threads": ("threads", int),
    "lm_max_tokens": ("max_tokens", int),
}


def parse_spec(options: str) -> CascadeConfig:
    """A :class:`CascadeConfig` from ``OPTION[,OPTION...]`` (the part after ``cascade:``).

    Options: ``asr``/``noasr``, ``aec``/``noaec``, ``partials``/``nopartials``,
    ``tts=ENGINE``, ``substeps=N``, ``policy=trained|vad-bargein|never-yield``,
    ``floor_model=PATH``, ``router=trained|all``, ``lm=local|openai|none``,
    ``lm_model=NAME_OR_GGUF``, ``lm_url=URL``, ``lm_key_env=VAR``, ``lm_threads=N``,
    ``lm_max_tokens=N``, ``tools=PATH``, ``name=NAME``.

    Raises:
        FrontendError: an unknown option or a bad value.
    """
    values: dict[str, Any] = {
        "policy": str,
        "floor_model": str,
        "router": str,
        "tools": str,
        "name": str,
    }
    values.update({key: conv for key, (_, conv) in _LM_KEYS.items()})
    kwargs, own = parse_options("cascade", options, values=values)
    lm_args = {_LM_KEYS[k][0]: v for k, v in own.items() if k in _LM_KEYS}
    try:
        lm = LmConfig(**lm_args)
    except ValueError as exc:
        raise FrontendError(f"frontend 'cascade': {exc}") from exc
    known = {f.name for f in fields(CascadeConfig)}
    args = {k: v for k, v in own.items() if k in known and k not in _LM_KEYS}
    args.update({k: v for k, v in kwargs.items() if k in known})
    return CascadeConfig(lm=lm, **args)
