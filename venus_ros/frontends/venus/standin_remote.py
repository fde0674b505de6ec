"""Remote code of the CPU stand-in checkpoint (copied into it as ``modeling_venus_standin.py``).

transformers loads this file from the checkpoint folder with ``trust_remote_code=True``, the
way it loads MiniCPM-o 4.5's ``modeling_minicpmo.py``. It implements the same entry points
(``AutoModel.from_pretrained`` -> ``as_duplex()`` -> ``prepare`` / ``streaming_prefill`` /
``streaming_generate`` -> ``as_simplex()``), the same result dictionary and the same
``total_ids`` / ``tokenizer`` attributes, around a tiny network with random weights:

* a byte-level vocabulary plus the protocol tokens at the ids ``added_tokens.json`` gives
  (the four MiniCPM-o 4.5 ids are the real ones);
* audio: 40 ms frames of the 16 kHz unit through a linear encoder; a camera frame: an 8x8
  thumbnail through another; text: token embeddings; all go through a small causal
  transformer with a KV cache (one forward pass per prefill, one per generated token);
* speech: 960 samples (40 ms at 24 kHz) per spoken character from a linear head, none for
  tokens inside a ``<delegate>`` span (the released Realtime-Venus filters those from TTS and
  says so; ``filter_delegate_audio=False`` makes a stand-in that voices them, like older ones).

What it *says* is not learned: the weights are random, so each generated token is the next one
of a plan (the logits are computed, then the planned id is taken). The plan: after the user has
spoken and a unit is quiet again, the next of ``config.replies``; after a ``<backend>X</backend>``
arrives in ``text_list``, ``X``; while it speaks, ``barge_in_units`` loud units in a row make it
stop with ``<|turn_eos|>`` and no speech. ``result["text"]`` drops special tokens (as upstream's
does), so a reader that uses it instead of ``total_ids`` would see the delegate query as words.

Only torch, numpy and transformers are imported: this file must stand alone in a checkpoint.
"""

import re

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel

_BACKEND = re.compile(r"<backend>(.*?)</backend>", re.DOTALL)


class VenusStandinConfig(PretrainedConfig):
    """Sizes, protocol token ids and the reply plan of the stand-in."""

    model_type = "venus_standin"

    def __init__(
        self,
        hidden_size=32,
        num_layers=2,
        num_heads=2,
        max_positions=2048,
        special_token_ids=None,
        replies=(),
        speech_rms=0.01,
        barge_in_units=2,
        audio_frame_samples=640,
        speech_samples_per_char=960,
        filter_delegate_audio=True,
        init_vision=True,
        init_audio=True,
        init_tts=True,
        **kwargs,
    ):
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.max_positions = max_positions
        self.special_token_ids = dict(special_token_ids or {})
        self.replies = list(replies)
        self.speech_rms = speech_rms
        self.barge_in_units = barge_in_units
        self.audio_frame_samples = audio_frame_samples
        self.speech_samples_per_char = speech_samples_per_char
        self.filter_delegate_audio = filter_delegate_audio
        self.init_vision = init_vision
        self.init_audio = init_audio
        self.init_tts = init_tts
        super().__init__(**kwargs)


class ByteTokenizer:
    """Bytes 0..255 plus the protocol tokens at their configured ids."""

    def __init__(self, special_token_ids):
        self.special = dict(special_token_ids)
        self.by_id = {v: k for k, v in self.special.items()}
        self._split = re.compile("(" + "|".join(re.escape(t) for t in self.special) + ")")

    def convert_tokens_to_ids(self, token):
        return self.special.get(token, -1)

    def encode(self, text):
        ids = []
        for piece in self._split.split(text):
            if piece in self.special:
                ids.append(self.special[piece])
            elif piece:
                ids.extend(piece.encode("utf-8"))
        return ids

    def decode(self, ids, skip_special_tokens=False):
        out, run = [], bytearray()
        for i in ids:
            i = int(i)
            if i < 256:
                run.append(i)
                continue
            out.append(run.decode("utf-8", errors="replace"))
            run = bytearray()
            if not skip_special_tokens:
                out.append(self.by_id.get(i, ""))
        out.append(run.decode("utf-8", errors="replace"))
        return "".join(out)


class _Block(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.norm2 = nn.LayerNorm(hidden)
        self.mlp = nn.Sequential(
            nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden)
        )

    def forward(self, x, cache):
        b, n, h = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, self.heads, h // self.heads).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        if cache is not None:
            k = torch.cat([cache[0], k], dim=2)
            v = torch.cat([cache[1], v], dim=2)
        past = k.shape[2] - n
        mask = torch.ones(n, k.shape[2], dtype=torch.bool, device=x.device).tril(past)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.out(y.transpose(1, 2).reshape(b, n, h))
        return x + self.mlp(self.norm2(x)), (k, v)


class VenusStandinModel(PreTrainedModel):
    """The simplex model; ``as_duplex()`` gives the streaming duplex session."""

    config_class = VenusStandinConfig
    base_model_prefix = "standin"
    _supports_sdpa = True
    _supports_flash_attn = True

    def __init__(self, config):
        super().__init__(config)
        h = config.hidden_size
        self.n_special = len(config.special_token_ids)
        self.embed = nn.Embedding(256 + self.n_special, h)
        self.audio_in = nn.Linear(config.audio_frame_samples, h)
        self.image_in = nn.Linear(8 * 8 * 3, h)
        self.blocks = nn.ModuleList(_Block(h, config.num_heads) for _ in range(config.num_layers))
        self.norm = nn.LayerNorm(h)
        self.lm_head = nn.Linear(h, 256 + self.n_special)
        self.tts = nn.Linear(h, config.speech_samples_per_char)
        self.post_init()

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(0.0, 0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            module.bias.data.zero_()

    def as_duplex(self, generate_audio=True, **kwargs):
        return StandinDuplex(self, generate_audio=generate_audio)


class StandinDuplex:
    """One duplex session over :class:`VenusStandinModel` (the MiniCPM-o duplex entry points)."""

    def __init__(self, model, generate_audio=True):
        self.model = model
        self.config = model.config
        self.generate_audio = generate_audio
        self.tokenizer = ByteTokenizer(self.config.special_token_ids)
        self.delegate_audio_filtered = bool(self.config.filter_delegate_audio)
        self._compact = {v: 256 + i for i, v in enumerate(self.config.special_token_ids.values())}
        self._expand = {c: v for v, c in self._compact.items()}
        self._prepared = False
        self._reset()

    # --------------------------------------------------------------- state
    def _reset(self):
        self.total_ids = []
        self.cache = [None] * len(self.model.blocks)
        self.current_time = 0.0
        self._plan = []
        self._replies = list(self.config.replies)
        self._backend = []
        self._user_spoke = False
        self._loud_units = 0
        self._quiet = True
        self._last_hidden = None
        self._inside = False

    def _id(self, token):
        return self.config.special_token_ids[token]

    @property
    def _param(self):
        return next(self.model.parameters())

    def _run(self, x):
        """One forward pass of ``x`` ([n, hidden]) through the blocks with the KV cache."""
        x = x.unsqueeze(0).to(self._param.dtype)
        for i, block in enumerate(self.model.blocks):
            x, self.cache[i] = block(x, self.cache[i])
            limit = self.config.max_positions
            if self.cache[i][0].shape[2] > limit:
                self.cache[i] = tuple(t[:, :, -limit:] for t in self.cache[i])
        h = self.model.norm(x)[0]
        self._last_hidden = h[-1]
        return h

    def _embed_ids(self, ids):
        index = torch.tensor([self._compact.get(i, i) for i in ids], device=self._param.device)
        return self.model.embed(index)

    def _prefill_ids(self, ids):
        if ids:
            self._run(self._embed_ids(ids))
            self.total_ids.extend(ids)

    # --------------------------------------------------------------- API
    def as_simplex(self, reset_session=True):
        if reset_session:
            self._reset()
            self._prepared = False
        return self.model

    @torch.no_grad()
    def prepare(self, prefix_system_prompt=None, ref_audio=None, prompt_wav_path=None, **kwargs):
        self._reset()
        prompt = prefix_system_prompt or "Streaming Omni Conversation."
        self._prefill_ids(self.tokenizer.encode(prompt))
        if ref_audio is not None:
            self._prefill_audio(np.asarray(ref_audio, dtype=np.float32)[:16000])
        self._prepared = True

    def _prefill_audio(self, audio):
        n = self.config.audio_frame_samples
        frames = audio[: len(audio) // n * n].reshape(-1, n)
        if len(frames):
            x = torch.from_numpy(np.ascontiguousarray(frames)).to(self._param.device)
            self._run(self.model.audio_in(x.to(self._param.dtype)))

    @torch.no_grad()
    def streaming_prefill(
        self,
        audio_waveform=None,
        frame_list=None,
        text_list=None,
        max_slice_nums=1,
        batch_vision_feed=False,
        **kwargs,
    ):
        if not self._prepared:
            raise RuntimeError("call prepare() before streaming_prefill()")
        self._prefill_ids([self._id("<unit>")])
        if frame_list and self.config.init_vision:
            for frame in frame_list:
                thumb = np.asarray(frame.convert("RGB").resize((8, 8)), dtype=np.float32) / 255.0
                x = torch.from_numpy(thumb.reshape(1, -1)).to(self._param.device)
                self._prefill_ids([self._id("<image>")])
                self._run(self.model.image_in(x.to(self._param.dtype)))
                self._prefill_ids([self._id("</image>")])
        if audio_waveform is not None:
            audio = np.asarray(audio_waveform, dtype=np.float32).reshape(-1)
            self._prefill_audio(audio)
            loud = float(np.sqrt(np.mean(np.square(audio)))) > self.config.speech_rms
            self.current_time += len(audio) / 16000.0
        else:
            loud = False
        for text in text_list or ():
            self._prefill_ids(self.tokenizer.encode(text))
            self._backend.extend(m.strip() for m in _BACKEND.findall(text))
        self._prefill_ids([self._id("</unit>")])
        self._loud_units = self._loud_units + 1 if loud else 0
        self._user_spoke |= loud
        self._quiet = not loud

    def _next_plan(self):
        if self._backend:
            return self._backend.pop(0)
        if self._replies and self._user_spoke and self._quiet:
            self._user_spoke = False
            return self._replies.pop(0)
        return None

    def _step(self):
        """Generate one token: logits from the last hidden state, then the planned id."""
        h = self._last_hidden
        logits = self.model.lm_head(h)
        planned = self._plan.pop(0) if self._plan else self._id("<|turn_eos|>")
        logits[self._compact.get(planned, planned)] = float("inf")
        chosen = int(torch.argmax(logits))
        token = self._expand.get(chosen, chosen)
        self._prefill_ids([token])
        return token, h

    @torch.no_grad()
    def streaming_generate(
        self,
        prompt_wav_path=None,
        max_new_speak_tokens_per_chunk=20,
        decode_mode="sampling",
        **kwargs,
    ):
        speaking = bool(self._plan)
        if speaking and self._loud_units >= self.config.barge_in_units:
            self._plan = []  # interrupted: stop at once, nothing more to say
            self._prefill_ids([self._id("<|speak|>")])
            self._step()  # the plan is empty: the model emits <|turn_eos|>
            self._inside = False
            return self._result(False, "", None, True)
        if not speaking:
            text = self._next_plan()
            if text is None:
                self._prefill_ids([self._id("<|listen|>")])
                return self._result(True, "", None, False)
            self._plan = [*self.tokenizer.encode(text), self._id("<|turn_eos|>")]
        self._prefill_ids([self._id("<|speak|>")])
        generated, audio, inside = [], [], self._inside
        eos = [self._id("<|turn_eos|>")]
        # a turn whose last character fills the unit still ends in it, not with a bare
        # <|turn_eos|> (a yield) in the next one
        while self._plan and (len(generated) < max_new_speak_tokens_per_chunk or self._plan == eos):
            token, h = self._step()
            generated.append(token)
            if token == self._id("<delegate>"):
                inside = True
            elif token in (self._id("</delegate>"), self._id("<|turn_eos|>")):
                inside = False
            elif token < 256 and self.generate_audio and self.config.init_tts:
                if inside and self.delegate_audio_filtered:
                    continue
                audio.append(torch.tanh(self.model.tts(h)).float().cpu().numpy() * 0.2)
            if token == self._id("<|turn_eos|>"):
                break
        self._inside = inside
        end = bool(generated) and generated[-1] == self._id("<|turn_eos|>")
        wave = np.concatenate(audio).astype(np.float32) if audio else None
        return self._result(False, self.tokenizer.decode(generated, True), wave, end)

    def _result(self, is_listen, text, wave, end_of_turn):
        return {
            "is_listen": is_listen,
            "text": text,
            "audio_waveform": wave,
            "end_of_turn": end_of_turn,
            "current_time": self.current_time,
        }
