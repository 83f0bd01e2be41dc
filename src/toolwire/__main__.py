import sys

from toolwire.cli import main  # absolute: a worker process runs this file on its own (see below)

if __name__ == "__main__":  # not when a worker process (anyio.to_process, multiprocessing) loads this module
    sys.exit(main())
