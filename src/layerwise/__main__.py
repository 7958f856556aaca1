"""``python -m layerwise``: the ``layerwise`` command (as ``python -m layerwise.cli``)."""

import sys

from layerwise.cli import main

if __name__ == "__main__":
    sys.exit(main())
