"""``python -m simtc`` runs the command line."""

import sys

from simtc.cli import main

if __name__ == "__main__":
    sys.exit(main())
