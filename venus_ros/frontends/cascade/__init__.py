"""The embedded cascade frontend: CPU models that ship inside pip packages.

* :mod:`~venus_ros.frontends.cascade.embed`: all-MiniLM-L6-v2 sentence embeddings, run by ONNX
  Runtime from a graph written directly from the packaged safetensors (no torch).
* :mod:`~venus_ros.frontends.cascade.router`: decides whether a user request needs the
  background harness and writes the ``<delegate>`` span that states it.

Submodules import their heavy libraries lazily; importing this package is cheap.
"""
