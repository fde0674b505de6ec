"""Evaluation of full-duplex behaviour: scenario suites, synthesis, runner, metrics and reports.

A suite is a folder of samples in the Full-Duplex-Bench v1.5 layout, extended with the keys
this project needs (see ``docs/eval-format.md``): :mod:`venus_ros.eval.scenario` reads and
writes it, :mod:`venus_ros.eval.synth` synthesizes one, the runner plays it through the
duplex loop and the metrics module scores the timelines. No module here imports rclpy.
"""
