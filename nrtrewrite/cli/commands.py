"""Imports every command module so that each registers on :data:`nrtrewrite.cli.main`.

One line per command module; a helper adding a command adds its line here.
"""
from nrtrewrite.cli import inspect as _inspect  # noqa: F401
from nrtrewrite.cli import assemble as _assemble  # noqa: F401
from nrtrewrite.cli import lower as _lower  # noqa: F401
