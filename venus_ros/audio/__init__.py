"""Audio at the edges and the embedded speech stack; no ROS.

- :mod:`.io`: WAV files and sound cards (PyAudio) for the mic and speaker nodes.
- :mod:`.aec`: echo cancellation (WebRTC AEC3) with the played audio as reference;
  :mod:`.erle` measures it.
- :mod:`.vad`: Silero VAD through ONNX Runtime.
- :mod:`.asr`: Whisper through faster-whisper, on VAD-cut segments.
- :mod:`.tts`: streaming TTS (espeak-ng, or piper as an optional extra).
- :mod:`.meter`: compute per second of audio, for every component.
"""
