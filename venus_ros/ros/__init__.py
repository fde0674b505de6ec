"""ROS adapters used by the nodes (DESIGN.md §9): the state kept around ROS interfaces."""
