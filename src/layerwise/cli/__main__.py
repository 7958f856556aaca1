"""``python -m layerwise.cli``: the ``layerwise`` command, also as ``torchrun --nproc_per_node N -m layerwise.cli``."""

import sys

from layerwise.cli import main

if __name__ == "__main__":
    sys.exit(main())
