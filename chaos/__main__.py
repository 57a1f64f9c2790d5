"""``python -m chaos``: the same as the ``rmq-chaos`` console script."""

import sys

from chaos.runner import main

sys.exit(main())
