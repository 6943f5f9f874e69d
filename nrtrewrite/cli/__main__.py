"""``python -m nrtrewrite.cli``: the same as the ``nrtrewrite`` console script."""

from nrtrewrite.cli import main

if __name__ == "__main__":
    main(prog_name="nrtrewrite")
