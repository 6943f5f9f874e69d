"""The ``nrtrewrite`` console script (and ``python -m nrtrewrite``): before anything heavy
is imported.

* Ctrl-C while the command's modules load (click, rich, numpy: a few tenths of a second,
  before the CLI's own handling is in place) is ``Aborted!``, status 1, as at any later
  moment, not a Python traceback;
* numpy's BLAS starts no threads of its own (``OPENBLAS_NUM_THREADS=1`` unless set):
  nothing here multiplies matrices, and under a limit on processes (``ulimit -u``) those
  threads failed to start and OpenBLAS killed the process with SIGINT, whatever the command.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        from nrtrewrite.cli import main as cli_main
    except KeyboardInterrupt:
        try:
            sys.stderr.write("Aborted!\n")
            sys.stderr.flush()
        except (OSError, ValueError, AttributeError):
            pass
        sys.exit(1)
    cli_main(prog_name="nrtrewrite")


if __name__ == "__main__":
    main()
