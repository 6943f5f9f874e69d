"""Where each command lives: a command module registers its command on
:data:`nrtrewrite.cli.main` when imported, and the group imports it the first time the
command is asked for (``nrtrewrite lower`` never imports the simulator; ``--help`` imports
them all to list them).

One line per command; a helper adding a command adds its line here.
"""

COMMANDS: dict[str, str] = {
    "inspect": "nrtrewrite.cli.inspect",
    "assemble": "nrtrewrite.cli.assemble",
    "lower": "nrtrewrite.cli.lower",
    "dump": "nrtrewrite.cli.dump",
    "diff": "nrtrewrite.cli.diff",
    "schedule": "nrtrewrite.cli.schedule",
    "explain": "nrtrewrite.cli.explain",
    "simulate": "nrtrewrite.cli.simulate",
}
