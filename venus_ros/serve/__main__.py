"""``python -m venus_ros.serve``: the same as ``venus-ros serve``."""

import sys

from venus_ros.serve.run import main

sys.exit(main())
