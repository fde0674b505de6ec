"""Benchmarks that print figures (``venus-ros bench core|ros|speech``).

Tests check correctness; these measure speed and memory on the machine they run on.
"""
