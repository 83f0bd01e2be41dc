"""`python -m bench`: the benchmark suite (see bench/suite.py; bench/run sets up its virtualenv)."""

import sys

from .suite import main

sys.exit(main())
