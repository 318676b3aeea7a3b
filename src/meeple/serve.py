"""``python -m meeple.serve env=<name> transport=socket|http|shm num_envs=N``: an env server."""

import sys

from meeple.cli.serve import main

if __name__ == "__main__":
    sys.exit(main())
