"""ROS 2 glue: each node declares parameters into a typed config, converts messages to core
objects, calls the core, and publishes. Nothing else lives here."""
