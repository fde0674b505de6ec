"""Reproducible training scripts for the models the cascade frontend ships (``venus-ros train``).

Each submodule imports its heavy libraries lazily; importing this package is cheap.
"""
