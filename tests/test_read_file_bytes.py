"""``container.read_file_bytes``: memory in proportion to the file.  It used to ask for
``MAX_FILE_BYTES + 1`` (5 GiB) of address space for any model (``fh.read(n)`` allocates n
bytes up front), so a 1.4 KB model failed with "out of memory" under ``ulimit -v 3000000``
or strict overcommit."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

from nrtrewrite.errors import LimitError
from nrtrewrite.neff.container import read_file_bytes
from test_atomic_output import FIX, ROOT, env


def _limit_address_space():
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def test_inspect_runs_in_3_gib_of_address_space():
    proc = subprocess.run([sys.executable, "-m", "nrtrewrite", "inspect", str(FIX / "ar2.neff")],
                          capture_output=True, text=True, cwd=ROOT, env=env(), timeout=120,
                          preexec_fn=_limit_address_space)
    assert proc.returncode == 0, proc.stderr
    assert "out of memory" not in proc.stderr


def test_the_bytes_and_the_limit(tmp_path):
    p = tmp_path / "f.bin"
    data = bytes(range(256)) * 1000
    p.write_bytes(data)
    assert read_file_bytes(str(p)) == data
    assert read_file_bytes(str(p), max_bytes=len(data)) == data
    with pytest.raises(LimitError, match="exceeds the limit of 255999 bytes"):
        read_file_bytes(str(p), max_bytes=len(data) - 1)
    (tmp_path / "empty").write_bytes(b"")
    assert read_file_bytes(str(tmp_path / "empty")) == b""


def test_a_file_growing_while_read_is_read_to_its_end_or_refused(tmp_path, monkeypatch):
    """The size is taken first; bytes appended before the read are read too, and past the
    limit refused (here the file grows between fstat and read)."""
    import os

    import nrtrewrite.neff.container as C
    p = tmp_path / "g.bin"
    p.write_bytes(b"a" * 100)
    real_fstat = os.fstat

    def fstat_then_grow(fd):
        st = real_fstat(fd)
        with open(p, "ab") as f:
            f.write(b"b" * 1000)
        return st
    monkeypatch.setattr(C.os, "fstat", fstat_then_grow)
    monkeypatch.setattr(C, "_READ_GROWING", 64)  # several reads of the growth
    assert read_file_bytes(str(p)) == b"a" * 100 + b"b" * 1000
    p.write_bytes(b"a" * 100)
    with pytest.raises(LimitError, match="file exceeds the limit of 500 bytes"):
        read_file_bytes(str(p), max_bytes=500)


def test_a_read_error_is_one_line_naming_the_file(tmp_path, monkeypatch):
    """An OS error while reading (EIO from a failing disk) is a ParseError naming the file
    and the OS's reason, as one opening it is."""
    import errno
    import os

    import nrtrewrite.neff.container as C
    from nrtrewrite.errors import ParseError
    p = tmp_path / "m.neff"
    p.write_bytes(b"x" * 100)
    real_fdopen = os.fdopen

    class Failing:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def read(self, n=-1):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
    monkeypatch.setattr(C.os, "fdopen", lambda fd, mode: Failing(real_fdopen(fd, mode)))
    with pytest.raises(ParseError) as exc:
        read_file_bytes(str(p))
    assert str(exc.value) == f"{p}: cannot read: {os.strerror(errno.EIO)}"


def test_read_file_blocks_reads_and_refuses_as_read_file_bytes(tmp_path, monkeypatch):
    """``read_file_blocks`` (``simulate OUT --model``'s hash of the model, review 51j): the
    same bytes in blocks of at most the block size, and the same refusals: the limit from
    the size before any block, a file that grows past it, a folder and a FIFO."""
    import os

    import nrtrewrite.neff.container as C
    from nrtrewrite.errors import ParseError
    from nrtrewrite.neff.container import read_file_blocks
    p = tmp_path / "f.bin"
    data = bytes(range(256)) * 1000  # 256,000 bytes: 3 blocks of 100,000 and one short
    p.write_bytes(data)
    blocks = list(read_file_blocks(str(p), block=100_000))
    assert [len(b) for b in blocks] == [100_000, 100_000, 56_000]
    assert b"".join(blocks) == data
    with pytest.raises(LimitError, match=r"^.*f\.bin: file of 256000 bytes exceeds the limit "
                                         r"of 255999 bytes \(MAX_FILE_BYTES\)$"):
        next(read_file_blocks(str(p), max_bytes=len(data) - 1))
    os.mkfifo(tmp_path / "fifo")
    for name, why in (("fifo", "not a regular file"), ("", "a directory")):
        with pytest.raises(ParseError) as exc:
            next(read_file_blocks(str(tmp_path / name)))
        assert str(exc.value) == f"{tmp_path / name}: cannot read: {why}"
    p.write_bytes(b"a" * 100)
    real_fstat = os.fstat

    def fstat_then_grow(fd):
        st = real_fstat(fd)
        with open(p, "ab") as f:
            f.write(b"b" * 1000)
        return st
    monkeypatch.setattr(C.os, "fstat", fstat_then_grow)
    with pytest.raises(LimitError, match="file exceeds the limit of 500 bytes"):
        list(read_file_blocks(str(p), max_bytes=500, block=64))
