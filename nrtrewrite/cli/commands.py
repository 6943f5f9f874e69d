"""Imports every command module so that each registers on :data:`nrtrewrite.cli.main`.

One line per command module; a helper adding a command adds its line here.
"""
from nrtrewrite.cli import inspect as _inspect  # noqa: F401
from nrtrewrite.cli import assemble as _assemble  # noqa: F401
from nrtrewrite.cli import lower as _lower  # noqa: F401
from nrtrewrite.cli import dump as _dump  # noqa: F401
from nrtrewrite.cli import diff as _diff  # noqa: F401
from nrtrewrite.cli import schedule as _schedule  # noqa: F401
from nrtrewrite.cli import explain as _explain  # noqa: F401
from nrtrewrite.cli import simulate as _simulate  # noqa: F401
