"""A tiny stand-in checkpoint folder for CPU tests and ``bench gpu --tiny``.

:func:`build_standin_checkpoint` writes a folder shaped like a MiniCPM-o 4.5 / Realtime-Venus
checkpoint: ``config.json`` with ``auto_map`` naming remote code, that remote code
(:mod:`.standin_remote`, copied as ``modeling_venus_standin.py``), ``added_tokens.json`` with
the protocol tokens, and ``model.safetensors`` with random weights made from the config.
:func:`~venus_ros.frontends.venus.frontend.load_venus_frontend` then loads it through
``transformers.AutoModel.from_pretrained(..., trust_remote_code=True)`` like the real thing.

What the stand-in replaces: the 9B weights, the MiniCPM-o remote code (Whisper audio encoder,
SigLIP vision, Qwen3 language model, CosyVoice-style speech decoder) and the model's learned
floor behaviour (replaced by a reply plan in its config). What it keeps real: the folder layout,
the transformers remote-code loading path, the duplex entry points with their keywords and
result dictionary, protocol token ids (MiniCPM-o 4.5's four), ``total_ids`` and a tokenizer
that hides special tokens from ``result["text"]``, a KV cache that grows with every prefill and
token, and 24 kHz speech. The ids of ``<unit>``, ``<image>``, ``<delegate>``, ``<backend>`` and
their closers are the stand-in's own (the loader reads them from ``added_tokens.json``).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections.abc import Sequence
from pathlib import Path

from venus_ros.core.protocol import TOKEN_IDS
from venus_ros.frontends.venus.checkpoint import PROTOCOL_TOKENS

__all__ = ["DEFAULT_REPLIES", "STANDIN_TOKEN_IDS", "build_standin_checkpoint"]

_REMOTE = Path(__file__).with_name("standin_remote.py")
_MODULE = "modeling_venus_standin"

#: Protocol token ids of the stand-in: MiniCPM-o 4.5's where known, then its own.
STANDIN_TOKEN_IDS: dict[str, int] = dict(TOKEN_IDS)
for _token in PROTOCOL_TOKENS:
    STANDIN_TOKEN_IDS.setdefault(_token, 151719 + len(STANDIN_TOKEN_IDS) - len(TOKEN_IDS))

#: The stand-in's default reply plan: one delegation, then whatever the backend returns.
DEFAULT_REPLIES: tuple[str, ...] = (
    "Let me check. <delegate>weather in Paris today</delegate> One moment.",
)


def build_standin_checkpoint(
    folder: str | Path,
    *,
    replies: Sequence[str] = DEFAULT_REPLIES,
    hidden_size: int = 32,
    num_layers: int = 2,
    model_type: str = "venus_standin",
    filter_delegate_audio: bool = True,
    seed: int = 0,
) -> Path:
    """Write a stand-in checkpoint into ``folder`` (created) and return it.

    Args:
        folder: where to write.
        replies: what it says, in order, each time the user has spoken and fallen quiet.
        hidden_size: width of its network.
        num_layers: transformer blocks.
        model_type: ``config.json``'s ``model_type``; ``"minicpmo"`` makes it look like a
            checkpoint whose remote code pins ``transformers==4.51.0`` (for the version check).
        filter_delegate_audio: False: its speech voices ``<delegate>`` spans too and it does
            not declare ``delegate_audio_filtered`` (like checkpoints before the released one).
        seed: torch seed of the random weights.

    Needs torch and transformers (the ``test`` extra).
    """
    import torch

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_REMOTE, folder / f"{_MODULE}.py")
    spec = importlib.util.spec_from_file_location(_MODULE, folder / f"{_MODULE}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = module.VenusStandinConfig(
        hidden_size=hidden_size,
        num_layers=num_layers,
        special_token_ids=STANDIN_TOKEN_IDS,
        replies=list(replies),
        filter_delegate_audio=filter_delegate_audio,
    )
    config.auto_map = {
        "AutoConfig": f"{_MODULE}.VenusStandinConfig",
        "AutoModel": f"{_MODULE}.VenusStandinModel",
    }
    torch.manual_seed(seed)
    model = module.VenusStandinModel(config)
    model.save_pretrained(folder)
    if model_type != "venus_standin":
        path = folder / "config.json"
        data = json.loads(path.read_text(encoding="utf-8"))
        data["model_type"] = model_type
        path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    (folder / "added_tokens.json").write_text(
        json.dumps(STANDIN_TOKEN_IDS, indent=2), encoding="utf-8"
    )
    return folder
