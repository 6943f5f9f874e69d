"""``python -m nrtrewrite``: the ``nrtrewrite`` command (docs/CLI.md)."""

from nrtrewrite.console import main

if __name__ == "__main__":
    main()
