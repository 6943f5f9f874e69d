"""The NEFF-like input format: container, instruction words, reader, writer, assembler.

Public entry points (see each module):

* :func:`read_model`, :func:`read_model_bytes` -> :class:`Model` (``reader``)
* :func:`write_model`, :func:`rewrite_streams`, :func:`write_bytes_atomic` (``writer``)
* :class:`Limits` (``container``); :func:`assemble_file`, :func:`assemble_spec` (``assembler``)
"""

from nrtrewrite.neff.container import Limits
from nrtrewrite.neff.model import Model
from nrtrewrite.neff.reader import read_model, read_model_bytes
from nrtrewrite.neff.writer import rewrite_streams, write_bytes_atomic, write_model

__all__ = ["Limits", "Model", "read_model", "read_model_bytes", "rewrite_streams",
           "write_bytes_atomic", "write_model"]
