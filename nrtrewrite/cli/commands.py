"""Imports every command module so that each registers on :data:`nrtrewrite.cli.main`.

One line per command module; a helper adding a command adds its line here.
"""
