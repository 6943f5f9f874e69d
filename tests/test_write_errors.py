"""OS errors while writing an output (docs/RELIABILITY.md §4, docs/CLI.md "Errors"): every
command that writes files (`lower`, `assemble`, `simulate MODEL` into its temporary folder,
`python -m nrtrewrite.golden`) gives one line naming the path and the OS's reason, a
non-zero exit, and leaves no partial output (a previous one untouched).  We run as root,
where permissions do not refuse anything: the errors are injected."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from nrtrewrite import bundle
from nrtrewrite.cli import main
from nrtrewrite.golden import main as golden_main
from test_atomic_output import FIX, verify_complete

ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], prog_name="nrtrewrite")


def one_line_error(res, text: str) -> str:
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nrtrewrite: error: "), res.stderr
    assert text in lines[0], lines[0]
    return lines[0]


# --- lower ----------------------------------------------------------------------------------

def fail_rank_file(monkeypatch, rank: int, exc: OSError) -> None:
    """The write of a rank's artifact records fails at ``rank`` (in a pool worker too)."""
    real = bundle._RankFiles.write

    def write(self, name, arr):
        if self.rdir.name == bundle.rank_dir_name(rank):
            raise exc
        return real(self, name, arr)
    monkeypatch.setattr(bundle._RankFiles, "write", write)


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("exc, reason", [
    (ENOSPC, "No space left on device"),
    (OSError(errno.EDQUOT, os.strerror(errno.EDQUOT)), "Disk quota exceeded"),
    (OSError(errno.EIO, os.strerror(errno.EIO)), "Input/output error"),
])
def test_lower_a_rank_file_that_cannot_be_written(tmp_path, monkeypatch, jobs, exc, reason):
    out = tmp_path / "out"
    fail_rank_file(monkeypatch, 3, exc)
    res = invoke("lower", "-q", FIX / "mix8.neff", "-o", out, "-j", jobs)
    assert one_line_error(res, "") == f"nrtrewrite: error: {out}: cannot write the output: {reason}"
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    assert invoke("lower", "-q", FIX / "ar2.neff", "-o", out).exit_code == 0
    before = verify_complete(out)
    fail_rank_file(monkeypatch, 3, exc)
    one_line_error(invoke("lower", "-q", FIX / "mix8.neff", "-o", out, "--force", "-j", jobs),
                   reason)
    assert verify_complete(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


@pytest.mark.parametrize("err", [errno.EROFS, errno.EACCES, errno.ENOSPC])
def test_lower_a_temporary_folder_that_cannot_be_made(tmp_path, monkeypatch, err):
    real = Path.mkdir

    def mkdir(self, *a, **kw):
        if self.name.startswith(".out.tmp-"):
            raise OSError(err, os.strerror(err), str(self))
        return real(self, *a, **kw)
    monkeypatch.setattr(Path, "mkdir", mkdir)
    res = invoke("lower", "-q", FIX / "ar2.neff", "-o", tmp_path / "out")
    line = one_line_error(res, f"{tmp_path / 'out'}: cannot write the output: {os.strerror(err)} "
                               f"({tmp_path / '.out.tmp-'}")
    assert line.endswith(")")
    assert list(tmp_path.iterdir()) == []


def test_lower_checks_that_cannot_stat_the_output_are_one_line(tmp_path, monkeypatch):
    """A folder on the way that cannot be searched (EACCES for a user, not for root): the
    output checks' `stat` failed with a PermissionError traceback."""
    out = tmp_path / "locked" / "out"
    real = Path.is_symlink

    def is_symlink(self):
        if self == out:
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real(self)
    monkeypatch.setattr(Path, "is_symlink", is_symlink)
    res = invoke("lower", "-q", FIX / "ar2.neff", "-o", out)
    assert one_line_error(res, "") == (f"nrtrewrite: error: {out}: cannot write the output: "
                                       f"Permission denied ({out})")
    assert list(tmp_path.iterdir()) == []


def test_lower_a_file_where_a_folder_is_expected(tmp_path):
    (tmp_path / "afile").write_text("x")
    # each line names OUT first, then why (docs/CLI.md "lower"; until 2026-12-06 the reason
    # alone)
    res = invoke("lower", "-q", FIX / "ar2.neff", "-o", tmp_path / "afile" / "out")
    one_line_error(res, f"nrtrewrite: error: {tmp_path / 'afile' / 'out'}: the output's parent "
                        f"{tmp_path / 'afile'} is not a folder")
    res = invoke("lower", "-q", FIX / "ar2.neff", "-o", tmp_path / "missing" / "out")
    one_line_error(res, f"nrtrewrite: error: {tmp_path / 'missing' / 'out'}: the output's parent "
                        f"folder {tmp_path / 'missing'} does not exist")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


# --- assemble -------------------------------------------------------------------------------

@pytest.fixture
def spec(tmp_path) -> Path:
    s = tmp_path / "ar2.yaml"
    shutil.copy(FIX / "ar2.yaml", s)
    return s


def entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("where", ["mkstemp", "write", "fsync", "replace"])
@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EACCES, errno.EROFS, errno.EIO])
def test_assemble_os_errors_are_one_line_and_leave_the_target_as_it_was(tmp_path, spec,
                                                                        monkeypatch, where, err):
    from nrtrewrite.neff import writer

    out = tmp_path / "m.neff"
    out.write_bytes(b"previous")
    exc = OSError(err, os.strerror(err))

    def raising(*a, **kw):
        raise exc
    if where == "mkstemp":
        monkeypatch.setattr(writer.tempfile, "mkstemp", raising)
    elif where == "write":
        real_fdopen = os.fdopen

        class Full:
            def __init__(self, fh):
                self.fh = fh

            def __enter__(self):
                return self

            def __exit__(self, *a):
                self.fh.close()

            def write(self, data):
                self.fh.write(data[:10])
                raise exc
        def fdopen(fd, mode="r", *a, **kw):  # the writer's file only (the spec is read too)
            fh = real_fdopen(fd, mode, *a, **kw)
            return Full(fh) if "w" in mode else fh
        monkeypatch.setattr(writer.os, "fdopen", fdopen)
    elif where == "fsync":
        monkeypatch.setattr(writer.os, "fsync", raising)
    else:
        monkeypatch.setattr(writer.os, "replace", raising)
    res = invoke("assemble", spec, "-o", out)
    monkeypatch.undo()
    assert one_line_error(res, "") == f"nrtrewrite: error: {out}: cannot write: {os.strerror(err)}"
    assert out.read_bytes() == b"previous"
    assert entries(tmp_path) == ["ar2.yaml", "m.neff"]  # no temporary file left


def test_assemble_refuses_what_it_must_not_replace(tmp_path, spec):
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    os.mkfifo(tmp_path / "fifo")
    os.link(spec, tmp_path / "hard.yaml")
    before = entries(tmp_path)
    cases = [
        ("afile/m.neff", "afile/m.neff: cannot write: Not a directory"),
        ("missing/m.neff", "missing/m.neff: cannot write: No such file or directory"),
        ("adir", "adir: cannot write: it is a folder (give the path of the file to write)"),
        ("adir/", "adir/: cannot write: it is a folder"),
        # as root, `-o /dev/null` replaced the device node with a regular file
        ("fifo", "fifo: cannot write: it exists and is not a regular file (a device, fifo or "
                 "socket); refusing to replace it"),
        # the spec itself (or a hard link of it) was replaced by the NEFF: the input lost
        ("ar2.yaml", "ar2.yaml: the output is the spec "),
        ("hard.yaml", "hard.yaml: the output is the spec "),
    ]
    for name, text in cases:
        res = invoke("assemble", spec, "-o", f"{tmp_path}/{name}")
        one_line_error(res, f"{tmp_path}/{text}")
    assert entries(tmp_path) == before
    assert (tmp_path / "fifo").is_fifo() and spec.read_bytes() == (FIX / "ar2.yaml").read_bytes()
    res = invoke("assemble", spec, "-o", "")
    assert res.exit_code == 2 and res.stderr.startswith(
        "nrtrewrite assemble: error: Invalid value for '-o' / '--output': an empty path")


def test_assemble_replaces_a_symbolic_link_not_its_target(tmp_path, spec):
    target = tmp_path / "target.neff"
    target.write_bytes(b"kept")
    (tmp_path / "link.neff").symlink_to(target)
    assert invoke("assemble", spec, "-o", tmp_path / "link.neff").exit_code == 0
    assert target.read_bytes() == b"kept"
    assert (tmp_path / "link.neff").read_bytes() == (FIX / "ar2.neff").read_bytes()


# --- simulate MODEL (its temporary folder) and golden ---------------------------------------

def test_simulate_a_temporary_folder_that_cannot_be_made(monkeypatch):
    def mkdtemp(*a, **kw):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/tmp/nrtrewrite-simulate-x")
    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    res = invoke("simulate", FIX / "ar2.neff")
    assert one_line_error(res, "") == (
        "nrtrewrite: error: /tmp/nrtrewrite-simulate-x: cannot make a temporary folder to "
        "lower the model into: No space left on device")


def _no_usable_temporary_folder(monkeypatch, tmp_path, var: str = "TMPDIR") -> str:
    """Python finds no folder it can write temporary files in: ``var`` (TMPDIR) names a
    folder that is not there and neither is any other folder ``tempfile`` tries (review
    48e: TMPDIR=/nonexistent with /tmp, /var/tmp and / read-only in a mount namespace).
    Returns that folder."""
    gone = str(tmp_path / "gone")
    for name in ("TMPDIR", "TEMP", "TMP"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(var, gone)
    monkeypatch.setattr(tempfile, "tempdir", None)  # (not the folder an earlier call found)
    monkeypatch.setattr(tempfile, "_candidate_tempdir_list",
                        lambda: [gone, str(tmp_path / "none")])
    return gone


def test_simulate_with_no_usable_temporary_folder_is_one_line(monkeypatch, tmp_path):
    """Found by review 48e: ``tempfile.gettempdir()`` ran outside simulate's error handling,
    so no usable temporary folder was an internal error, exit 70; SIMULATOR.md §1 promises
    exit 2 naming the folder it tried."""
    gone = _no_usable_temporary_folder(monkeypatch, tmp_path)
    res = invoke("simulate", FIX / "ar2.neff")
    assert one_line_error(res, "") == (
        f"nrtrewrite: error: {gone}: cannot make a temporary folder to lower the model into: "
        f"none of the folders tried can be written: {gone} (TMPDIR), {tmp_path}/none")
    assert entries(tmp_path) == []


@pytest.mark.parametrize("private", [True, False])
def test_no_usable_temporary_folder_names_the_variables_folders_in_pythons_order(
        monkeypatch, tmp_path, private):
    """With TMPDIR unset the line names the folder tried first, TMP's (review 48m: naming
    none, simulate fell back to the literal ``TMPDIR``, and no test saw it), also on a
    Python whose ``tempfile`` lacks the private ``_candidate_tempdir_list`` the list is
    read from (review 48m: an internal error then): the variables' folders alone."""
    gone = _no_usable_temporary_folder(monkeypatch, tmp_path, "TMP")
    if not private:
        monkeypatch.delattr(tempfile, "_candidate_tempdir_list")
    monkeypatch.setattr(tempfile, "gettempdir", lambda: (_ for _ in ()).throw(
        FileNotFoundError(2, "No usable temporary directory found in [...]")))
    res = invoke("simulate", FIX / "ar2.neff")
    tried = f"{gone} (TMP), {tmp_path}/none" if private else f"{gone} (TMP)"
    assert one_line_error(res, "") == (
        f"nrtrewrite: error: {gone}: cannot make a temporary folder to lower the model into: "
        f"none of the folders tried can be written: {tried}")
    assert entries(tmp_path) == []
    if not private:  # (Python's order, TMPDIR, TEMP, TMP, a folder given twice named once
        # by the first that gives it: review 48p)
        other = str(tmp_path / "other")
        monkeypatch.setenv("TEMP", other)
        monkeypatch.setenv("TMPDIR", gone)
        assert one_line_error(invoke("simulate", FIX / "ar2.neff"), "") == (
            f"nrtrewrite: error: {gone}: cannot make a temporary folder to lower the model "
            f"into: none of the folders tried can be written: {gone} (TMPDIR), {other} (TEMP)")


def test_golden_with_no_usable_temporary_folder_names_the_folders(monkeypatch, tmp_path,
                                                                  capsys):
    """``python -m nrtrewrite.golden`` alike: until 2026-12-06 its line was Python's,
    ``No usable temporary directory found in ['...', ...]``, naming no temporary folder."""
    gone = _no_usable_temporary_folder(monkeypatch, tmp_path)
    golden = tmp_path / "g.tar.gz"
    with pytest.raises(SystemExit) as exc:
        golden_main([str(FIX / "ar2.neff"), str(golden)])
    assert exc.value.code == 2
    assert capsys.readouterr().err == (
        f"nrtrewrite.golden: error: {gone}: cannot make a temporary folder to lower the model "
        f"into: none of the folders tried can be written: {gone} (TMPDIR), {tmp_path}/none\n")
    assert entries(tmp_path) == []


def test_golden_errors_are_one_line_and_leave_the_golden_as_it_was(tmp_path, monkeypatch,
                                                                   capsys):
    from nrtrewrite.neff import writer

    golden = tmp_path / "g.tar.gz"
    golden.write_bytes(b"previous")

    def replace(a, b):  # the last step of the atomic write (the lowering uses renameat2)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(writer.os, "replace", replace)
    with pytest.raises(SystemExit) as exc:
        golden_main([str(FIX / "ar2.neff"), str(golden)])
    monkeypatch.undo()
    assert exc.value.code == 2
    assert capsys.readouterr().err == (f"nrtrewrite.golden: error: {golden}: cannot write: No "
                                       "space left on device\n")
    assert golden.read_bytes() == b"previous" and entries(tmp_path) == ["g.tar.gz"]
    for args, text in [
        ([str(tmp_path / "none.neff"), str(golden)], f"{tmp_path / 'none.neff'}: No such file or directory"),
        ([str(FIX / "ar2.neff"), str(golden / "x")], f"{golden / 'x'}: cannot write: Not a "
                                                     "directory"),
        ([str(FIX / "bad" / "fp32_allreduce.neff"), str(golden)],
         f"{FIX / 'bad' / 'fp32_allreduce.neff'}: member sg00/sp.bin"),
    ]:
        with pytest.raises(SystemExit) as exc:
            golden_main(args)
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith(f"nrtrewrite.golden: error: {text}") and err.count("\n") == 1, err
    assert golden.read_bytes() == b"previous" and entries(tmp_path) == ["g.tar.gz"]


@pytest.mark.parametrize("how", ["same", "hard link", "symbolic link"])
def test_golden_never_replaces_its_model(tmp_path, capsys, how):
    """Found by an exploratory tester: ``python -m nrtrewrite.golden m.neff m.neff`` wrote
    the golden tar.gz over the model, exit 0."""
    model = tmp_path / "m.neff"
    shutil.copyfile(FIX / "ar2.neff", model)
    out = model if how == "same" else tmp_path / "o.tar.gz"
    if how == "hard link":
        os.link(model, out)
    elif how == "symbolic link":
        out.symlink_to(model)
    with pytest.raises(SystemExit) as exc:
        golden_main([str(model), str(out)])
    assert exc.value.code == 2
    assert capsys.readouterr().err == (
        f"nrtrewrite.golden: error: {out}: the output is the model {model} itself; nrtrewrite "
        "never replaces its input: choose another output path\n")
    assert model.read_bytes() == (FIX / "ar2.neff").read_bytes()


def test_golden_with_a_standard_output_it_cannot_write_is_one_line(tmp_path):
    """Found by an exploratory tester: ``> /dev/full`` was a traceback and status 1, and a
    closed standard output status 0 with nothing said."""
    import subprocess
    import sys
    golden = tmp_path / "g.tar.gz"
    cmd = [sys.executable, "-m", "nrtrewrite.golden", str(FIX / "ar2.neff"), str(golden)]
    with open("/dev/full", "w") as full:
        res = subprocess.run(cmd, stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert (res.returncode, res.stderr) == (2, "nrtrewrite.golden: error: cannot write the "
                                               "standard output: No space left on device\n")
    assert golden.is_file()  # written before the line that says so
    golden.unlink()
    res = subprocess.run(cmd, stderr=subprocess.PIPE, text=True, timeout=120,
                         preexec_fn=lambda: os.close(1))
    assert (res.returncode, res.stderr) == (
        2, "nrtrewrite.golden: error: the standard output is closed\n")


def _no_inode_for_rank_file(monkeypatch, rank: int, name: str) -> None:
    """Creating ``name`` of ``rank`` fails as a file system out of inodes fails it: open's
    ``ENOSPC`` naming the file (in a pool worker too)."""
    real = bundle._RankFiles.write

    def write(self, arr_name, arr):
        if self.rdir.name == bundle.rank_dir_name(rank) and arr_name == name:
            path = self.rdir / arr_name
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real(self, arr_name, arr)
    monkeypatch.setattr(bundle._RankFiles, "write", write)


@pytest.mark.parametrize("jobs", [1, 2])
def test_lower_names_a_file_it_could_not_write_by_its_place_in_the_output(
        tmp_path, monkeypatch, jobs):
    """Review 54g F7: the file was named in the temporary sibling, ``.out.tmp-PID-HEX/...``,
    removed by the time the line is read and different from run to run; it is named by its
    place in the output."""
    out = tmp_path / "out"
    _no_inode_for_rank_file(monkeypatch, 2, "sem.bin")
    res = invoke("lower", "-q", FIX / "mix8.neff", "-o", out, "-j", jobs)
    assert one_line_error(res, "") == (f"nrtrewrite: error: {out}: cannot write the output: "
                                       f"No space left on device ({out}/rank-0002/sem.bin)")
    assert list(tmp_path.iterdir()) == []


def test_simulate_names_a_file_it_could_not_write_inside_its_temporary_folder(
        tmp_path, monkeypatch):
    """Review 54g F7: ``simulate MODEL.neff``'s line named the file with its temporary
    folder's random name (and the sibling's: ``.mix8.lowered.tmp-7392-c1632653/...``);
    CLI.md promises ``<temporary>/...``, so two runs print the same line."""
    _no_inode_for_rank_file(monkeypatch, 2, "sem.bin")
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # (simulate makes its folder there)
    lines = [one_line_error(invoke("simulate", FIX / "mix8.neff"), "") for _ in range(2)]
    assert lines == ["nrtrewrite: error: <temporary>/mix8.lowered: cannot write the output: "
                     "No space left on device (<temporary>/mix8.lowered/rank-0002/sem.bin)"] * 2
    assert list(tmp_path.iterdir()) == []


class _FillingFile:
    """A file being written on a disk with ``room`` bytes left for it: a write past them
    raises ENOSPC naming no file, as ``write(2)`` of a full disk does (EFBIG of ``ulimit -f``
    the same)."""

    def __init__(self, fh, room: int, err: int):
        self.fh, self.room, self.err = fh, room, err

    def write(self, data) -> int:
        n = memoryview(data).nbytes
        if n > self.room:
            raise OSError(self.err, os.strerror(self.err))
        self.room -= n
        return self.fh.write(data)

    def __getattr__(self, name):
        return getattr(self.fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.fh.close()


def _disk_fills_at(monkeypatch, rank: int, name: str, room: int, err: int) -> None:
    """``rank``'s file ``name`` gets ``room`` bytes, then its write fails (in a pool worker
    too: the patch is inherited)."""
    def fake_open(path, mode="r", *args, **kwargs):
        fh = open(path, mode, *args, **kwargs)
        p = Path(path)
        if p.name == name and p.parent.name == bundle.rank_dir_name(rank) and "w" in mode:
            return _FillingFile(fh, room, err)
        return fh
    monkeypatch.setattr(bundle, "open", fake_open, raising=False)


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("name, room, err", [
    ("sem.bin", 0, errno.ENOSPC),            # a record array's first write (_RankFiles)
    ("manifest.json", 10, errno.ENOSPC),     # the rank manifest, past its first 10 bytes
    ("sem.bin", 0, errno.EFBIG),             # `ulimit -f`: File too large
])
def test_a_write_refused_part_way_names_the_file(tmp_path, monkeypatch, jobs, name, room,
                                                 err):
    """Review 59k: the disk filling during a write (its error names no file) gave only
    ``OUT: cannot write the output: No space left on device``; the file is named by its place
    in the output, as docs/CLI.md "lower" and "simulate" promise."""
    out = tmp_path / "out"
    _disk_fills_at(monkeypatch, 2, name, room, err)
    res = invoke("lower", "-q", FIX / "mix8.neff", "-o", out, "-j", jobs)
    assert one_line_error(res, "") == (f"nrtrewrite: error: {out}: cannot write the output: "
                                       f"{os.strerror(err)} ({out}/rank-0002/{name})")
    assert list(tmp_path.iterdir()) == []


def test_simulate_names_the_file_a_full_disk_refused_in_its_temporary_folder(
        tmp_path, monkeypatch):
    _disk_fills_at(monkeypatch, 2, "sem.bin", 0, errno.ENOSPC)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    line = one_line_error(invoke("simulate", FIX / "mix8.neff"), "")
    assert line == ("nrtrewrite: error: <temporary>/mix8.lowered: cannot write the output: "
                    "No space left on device (<temporary>/mix8.lowered/rank-0002/sem.bin)")
    assert list(tmp_path.iterdir()) == []
