"""Engines: our networks exported to ONNX, built into ``engines/<name>/`` and run on the best
ONNX Runtime execution provider.

- :mod:`.networks`: what can be built (the floor policy, the MiniLM encoder) and each one's
  reference implementation;
- :mod:`.build`: specs (``engines/<name>/spec.yaml``), the build into ``build/`` with a manifest
  and parity checks, verification (``venus-ros engines build|list|verify``);
- :mod:`.providers`: TensorRT -> CUDA -> CPU provider probing (once, one log line) and the
  session factory, with the TensorRT engine cache.

No module here imports onnx, onnxruntime or torch at import time (tests/test_layers.py).
"""
