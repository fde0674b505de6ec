"""Audio input and output at the edges of the graph: WAV files and sound cards (via PyAudio).

Pure Python + numpy/soundfile; no ROS. The mic and speaker nodes wrap these classes.
"""
