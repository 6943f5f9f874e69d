"""``nrtrewrite diff A B``: field-level differences; exit 0 identical, 1 different, 2 error."""

from __future__ import annotations

import json
import sys

import click

from nrtrewrite.cli import main
from nrtrewrite.diff import diff_outputs


@main.command("diff")
@click.argument("a", type=click.Path(exists=True, file_okay=False))
@click.argument("b", type=click.Path(exists=True, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (docs/CLI.md).")
@click.option("--max", "max_lines", type=click.IntRange(min=0), default=50, show_default=True,
              help="Differences printed (0 = all); the count is always exact.")
def diff_cmd(a, b, as_json, max_lines):
    """Compare two output folders field by field (rank, file, record, field, both values)."""
    diffs = diff_outputs(a, b)
    if as_json:
        click.echo(json.dumps({"identical": not diffs, "count": len(diffs),
                               "differences": [d.to_json() for d in diffs]}, indent=1,
                              default=str))
    else:
        shown = diffs if not max_lines else diffs[:max_lines]
        for d in shown:
            click.echo(d.line())
        if len(shown) < len(diffs):
            click.echo(f"... {len(diffs) - len(shown)} more differences")
        click.echo("identical" if not diffs else f"{len(diffs)} difference(s)")
    sys.exit(1 if diffs else 0)
