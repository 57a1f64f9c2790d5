"""``python -m pocketmq.chaos``: the same as the ``rmq-chaos`` console script."""

import sys

from pocketmq.chaos.runner import main

sys.exit(main())
