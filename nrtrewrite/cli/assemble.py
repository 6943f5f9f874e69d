"""``nrtrewrite assemble SPEC -o MODEL.neff``: build a NEFF-like file from a YAML/JSON spec
(schema: docs/ASSEMBLE.md)."""

from __future__ import annotations

import click

from nrtrewrite.cli import (OneValue, encodable, main, no_dash, no_dash_out, note_placed,
                            placing_output)
from nrtrewrite.errors import counted, escape_path
from nrtrewrite.neff.assembler import assemble_file


#: ``assemble``'s ``--help`` text (not a docstring: see :data:`nrtrewrite.cli.MAIN_HELP`)
ASSEMBLE_HELP = ("Assemble SPEC (YAML or JSON) into a NEFF-like file; the result is read back and "
                 "validated unless the spec says `validate: false`.")


@main.command("assemble", help=ASSEMBLE_HELP)
@click.argument("spec_path", metavar="SPEC", callback=no_dash)
@click.option("-o", "--output", "out_path", cls=OneValue, required=True, metavar="MODEL.neff",
              callback=no_dash_out,
              help="Where to write the NEFF-like file (atomically).")
def assemble_cmd(spec_path: str, out_path: str) -> None:
    """The command (its help: :data:`ASSEMBLE_HELP`)."""
    if spec_path == "":  # (reading "" fails with no file to name)
        raise click.BadParameter("an empty path", param_hint="'SPEC'")
    if out_path == "":
        raise click.BadParameter("an empty path", param_hint="'-o' / '--output'")
    # (a stop once MODEL.neff is replaced says so first, as lower's: note_placed; until
    # 2026-12-06 it said only `terminated by SIGTERM`, the previous file gone)
    result = assemble_file(spec_path, out_path, placing=placing_output, on_placed=note_placed)
    triggers = len(result.model.triggers) if result.model is not None else "unchecked"
    # (the path escaped as lower's title has it: a line break, an escape or a character the
    # output's encoding lacks was printed raw, split, stripped or as '?', until 2026-12-05)
    click.echo(f"{encodable(escape_path(out_path))}: {len(result.data)} bytes, "
               f"{counted(triggers, 'trigger')}")
