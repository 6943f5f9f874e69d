"""``python -m nrtrewrite``: the ``nrtrewrite`` command (docs/CLI.md)."""

from nrtrewrite.cli import main

if __name__ == "__main__":
    main(prog_name="nrtrewrite")
