"""``python -m tilejit``: see ``tilejit/cli.py``."""
import sys

from tilejit.cli import main

sys.exit(main())
