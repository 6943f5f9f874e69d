"""What reaches the user when a command stops on something nrtrewrite did not raise on
purpose (docs/CLI.md "Errors", docs/RELIABILITY.md §4): one line on stderr and an exit
status of its own, never a traceback unless ``--traceback``; the output guarantees still
hold (a ``lower`` stopped mid-run leaves neither its output nor its temporary folder)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

import nrtrewrite.lower as lower_mod
from nrtrewrite.cli import EXIT_INTERNAL_ERROR, EXIT_OUT_OF_MEMORY, main
from test_atomic_output import FIX, ROOT, env, verify_complete

#: (the message's line break escaped as `\n`, docs/CLI.md "Errors"; a space until 2026-12-05)
INTERNAL = ("nrtrewrite: internal error: ValueError: a bad value\\non two lines (a bug in "
            "nrtrewrite; rerun with --traceback for the details and report it)")


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], prog_name="nrtrewrite")


def fail_at_rank(monkeypatch, exc: BaseException, rank: int = 3) -> None:
    """The emitter raises ``exc`` when it reaches ``rank`` (after other ranks were written;
    in a pool worker too: the workers are forked with the patch in place)."""
    real = lower_mod._emit_batch

    def emit(builder, plan, batch, r, *a, **kw):
        if r == rank:
            raise exc
        return real(builder, plan, batch, r, *a, **kw)
    monkeypatch.setattr(lower_mod, "_emit_batch", emit)


def one_line(result, code: int) -> str:
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stdout == ""
    return lines[0]


@pytest.mark.parametrize("jobs", [1, 2])
def test_an_unexpected_exception_is_one_line_exit_70_and_leaves_nothing(tmp_path, monkeypatch,
                                                                         jobs):
    fail_at_rank(monkeypatch, ValueError("a bad value\non two lines"))
    res = invoke("lower", "-q", FIX / "mix8.neff", "-o", tmp_path / "out", "-j", jobs)
    assert one_line(res, EXIT_INTERNAL_ERROR) == INTERNAL
    assert list(tmp_path.iterdir()) == []  # neither OUT nor the temporary sibling


def test_an_unexpected_exception_leaves_a_previous_output_untouched(tmp_path, monkeypatch):
    out = tmp_path / "out"
    assert invoke("lower", "-q", FIX / "mix8.neff", "-o", out).exit_code == 0
    before = verify_complete(out)
    fail_at_rank(monkeypatch, KeyError("rank"))
    res = invoke("lower", "-q", FIX / "mix8.neff", "-o", out, "--force", "-j", 1)
    assert one_line(res, EXIT_INTERNAL_ERROR).startswith("nrtrewrite: internal error: KeyError: ")
    assert verify_complete(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_traceback_shows_the_exception(tmp_path, monkeypatch):
    fail_at_rank(monkeypatch, ValueError("a bad value"))
    res = invoke("--traceback", "lower", "-q", FIX / "mix8.neff", "-o", tmp_path / "out",
                 "-j", 1)
    # the traceback, then the error's own line and status (70: an internal error)
    assert res.exit_code == EXIT_INTERNAL_ERROR, res.output
    lines = res.stderr.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert "ValueError: a bad value" in lines
    assert lines[-1].startswith("nrtrewrite: internal error: ValueError: a bad value")
    assert list(tmp_path.iterdir()) == []


def test_traceback_keeps_an_errors_own_line_and_status_2(tmp_path, monkeypatch):
    """CLI.md "Errors": `--traceback` prints the traceback above the error's line and the
    status stays the error's own: a model refused (an FP32 all-reduce: the CCE reduce has
    no FP32, seed 000 §3.4) and an OS error naming its path are status 2, as without it."""
    res = invoke("--traceback", "lower", FIX / "bad" / "fp32_allreduce.neff", "-o",
                 tmp_path / "out")
    lines = res.stderr.splitlines()
    assert res.exit_code == 2 and lines[0] == "Traceback (most recent call last):", res.stderr
    assert lines[-1].startswith(f"nrtrewrite: error: {FIX / 'bad' / 'fp32_allreduce.neff'}: ")
    assert "ALLREDUCE in FP32 cannot be lowered" in lines[-1]
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr("nrtrewrite.cli.inspect.read_model",
                        lambda *a, **kw: (_ for _ in ()).throw(
                            PermissionError(errno.EACCES, "Permission denied", "/some/file")))
    res = invoke("--traceback", "inspect", FIX / "ar2.neff")
    lines = res.stderr.splitlines()
    assert res.exit_code == 2 and lines[0] == "Traceback (most recent call last):", res.stderr
    assert lines[-1] == "nrtrewrite: error: /some/file: Permission denied"


@pytest.mark.parametrize("jobs", [1, 2])
def test_out_of_memory_is_one_line_exit_71(tmp_path, monkeypatch, jobs):
    fail_at_rank(monkeypatch, MemoryError())
    res = invoke("lower", "-q", FIX / "mix8.neff", "-o", tmp_path / "out", "-j", jobs)
    assert one_line(res, EXIT_OUT_OF_MEMORY) == (
        "nrtrewrite: error: out of memory: 'nrtrewrite lower' needed more memory than the "
        "machine gave it (MemoryError; rerun with --traceback to see where)")
    assert list(tmp_path.iterdir()) == []
    res = invoke("--traceback", "lower", "-q", FIX / "mix8.neff", "-o", tmp_path / "out",
                 "-j", jobs)
    assert res.exit_code == EXIT_OUT_OF_MEMORY  # the same status, the traceback above
    # (with -j 2 the worker's traceback comes first, as the cause: RemoteTraceback)
    assert "Traceback (most recent call last):" in res.stderr and "MemoryError" in res.stderr
    assert res.stderr.splitlines()[-1].startswith("nrtrewrite: error: out of memory")


def test_an_os_error_names_its_path_and_reason(tmp_path, monkeypatch):
    fail_at_rank(monkeypatch, PermissionError(errno.EACCES, "Permission denied", "/some/file"))
    res = invoke("lower", "-q", FIX / "mix8.neff", "-o", tmp_path / "out", "-j", 1)
    # write_output names the output; the OS error's own path follows
    assert one_line(res, 2) == (f"nrtrewrite: error: {tmp_path / 'out'}: cannot write the "
                                "output: Permission denied (/some/file)")
    monkeypatch.setattr("nrtrewrite.cli.inspect.read_model",
                        lambda *a, **kw: (_ for _ in ()).throw(
                            FileNotFoundError(errno.ENOENT, "No such file or directory", "/x")))
    res = invoke("inspect", FIX / "ar2.neff")
    assert one_line(res, 2) == "nrtrewrite: error: /x: No such file or directory"
    monkeypatch.setattr("nrtrewrite.cli.inspect.read_model",
                        lambda *a, **kw: (_ for _ in ()).throw(OSError(errno.EIO, "I/O error")))
    res = invoke("inspect", FIX / "ar2.neff")
    assert one_line(res, EXIT_INTERNAL_ERROR) == (
        "nrtrewrite: internal error: OSError: [Errno 5] I/O error (a bug in nrtrewrite; rerun "
        "with --traceback for the details and report it)")


def test_click_exits_aborts_and_interrupts_behave_as_before(tmp_path, monkeypatch):
    """SystemExit, click's Exit / Abort / usage errors, Ctrl-C and a closed pipe are not
    internal errors.  Ctrl-C and a closed pipe are 128 + the signal (130, 141), as SIGTERM's
    143: click's 1 read as ``diff``'s "the outputs differ" (a CI tester, 2026-12-04)."""
    def raising(exc):
        def read_model(*a, **kw):
            raise exc
        monkeypatch.setattr("nrtrewrite.cli.inspect.read_model", read_model)
        return invoke("inspect", FIX / "ar2.neff")

    assert raising(SystemExit(5)).exit_code == 5
    assert raising(click.exceptions.Exit(3)).exit_code == 3
    res = raising(KeyboardInterrupt())
    assert res.exit_code == 130 and res.stderr.strip() == "Aborted!"
    res = raising(click.exceptions.Abort())
    assert res.exit_code == 130 and res.stderr.strip() == "Aborted!"
    res = raising(click.BadParameter("no good", param_hint="'MODEL'"))
    assert res.exit_code == 2
    assert res.stderr.startswith("nrtrewrite inspect: error: Invalid value for 'MODEL': no good")
    res = raising(BrokenPipeError(errno.EPIPE, "Broken pipe"))
    assert res.exit_code == 141 and res.stderr == ""


def test_ctrl_c_under_traceback_is_aborted_as_without_it(monkeypatch):
    """CLI.md "Errors": "A Ctrl-C under --traceback is Aborted! and 130, as without it (no
    traceback: it is no error)": the same single line on a redirected stderr; it began
    with a blank line (click's own Abort, reached by re-raising the interrupt)."""
    def read_model(*a, **kw):
        raise KeyboardInterrupt
    monkeypatch.setattr("nrtrewrite.cli.inspect.read_model", read_model)
    for args in (["inspect"], ["--traceback", "inspect"]):
        res = invoke(*args, FIX / "ar2.neff")
        assert (res.exit_code, res.stderr, res.stdout) == (130, "Aborted!\n", ""), args


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("args", [
    ["inspect", FIX / "ar2.neff"],
    ["inspect", FIX / "ar2.neff", "--json"],
    ["explain", FIX / "ar2.neff", "--json"],
    ["schedule", FIX / "ar2.neff", "--rank", "0"],
    ["schedule", FIX / "ar2.neff", "--rank", "0", "--json"],
    ["simulate", "OUT", "--json"],
    ["dump", "OUT", "--sem", "--json"],
    ["diff", "OUT", "OUT", "--json"],
])
def test_a_full_standard_output_is_one_line(args, tmp_path):
    if "OUT" in args:
        out = tmp_path / "out"
        assert subprocess.run([sys.executable, "-m", "nrtrewrite", "lower", "-q",
                               str(FIX / "ar2.neff"), "-o", str(out)], cwd=ROOT, env=env(),
                              timeout=120).returncode == 0
        args = [out if a == "OUT" else a for a in args]
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "nrtrewrite", *map(str, args)],
                              stdout=full, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                              env=env(), timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == ("nrtrewrite: error: cannot write the standard output: No space "
                           "left on device\n")


@pytest.mark.parametrize("args", [
    ["lower", FIX / "mix8.neff", "-o", "NEW"],      # rich's console: its own exit was 1
    ["inspect", FIX / "mix8.neff"],
    ["schedule", FIX / "mix8.neff", "--rank", "0"],
    ["dump", "OUT", "--cce"],
    ["dump", "OUT", "--cce", "--json"],
    ["diff", "OUT", "OTHER"],
    ["simulate", "OUT"],
])
def test_a_closed_pipe_is_128_plus_sigpipe_quietly(args, tmp_path):
    """A reader that goes away (``| head -c 1``) ends every command quietly with 141, never
    1, which is ``diff``'s "the outputs differ" and ``simulate``'s "a trigger does not match"
    (a CI tester; rich's console exited 1 itself, click too)."""
    out, other = tmp_path / "out", tmp_path / "other"
    for o, algo in ((out, "mesh"), (other, "ring")):
        assert subprocess.run([sys.executable, "-m", "nrtrewrite", "lower", "-q", "--algo",
                               algo, str(FIX / "mix8.neff"), "-o", str(o)], cwd=ROOT,
                              env=env(), timeout=120).returncode == 0
    args = [{"OUT": out, "OTHER": other, "NEW": tmp_path / "new"}.get(a, a) for a in args]
    r, w = os.pipe()  # the reader gone before the command writes: its first write fails
    os.close(r)
    try:
        proc = subprocess.run([sys.executable, "-m", "nrtrewrite", *map(str, args)], stdout=w,
                              stderr=subprocess.PIPE, cwd=ROOT, env=env(), timeout=120)
    finally:
        os.close(w)
    assert (proc.returncode, proc.stderr) == (141, b"")


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["--version"], ["--traceback", "--help"],
                                  ["lower", "--help"]])
def test_the_groups_own_options_into_a_closed_pipe_are_141_quietly(args):
    """docs/CLI.md "Errors": a closed pipe is 141 (128 + SIGPIPE), quietly, whatever prints.
    The group's own options print while click parses the command line, where click's
    ``main`` caught the closed pipe itself and exited 1 with nothing said (review R2), while
    a command's ``--help`` was 141."""
    r, w = os.pipe()  # the reader gone before the first byte
    os.close(r)
    try:
        proc = subprocess.run([sys.executable, "-m", "nrtrewrite", *args], stdout=w,
                              stderr=subprocess.PIPE, cwd=ROOT, env=env(), timeout=120)
    finally:
        os.close(w)
    assert (proc.returncode, proc.stderr) == (128 + 13, b"")


#: A program calling ``cli.main`` (argv[1]: ``standalone`` or not) with ARGS (argv[2:]), its
#: descriptor 1 a pipe whose reader is gone: prints on stderr the status, whether descriptor
#: 1 is then the file it was (a dup taken before, by st_dev and st_ino), what the program's
#: own write to it raises, and how many descriptors it holds more than before
_CALLER_OF_MAIN = r"""
import os, sys
keep = os.dup(1)
fds = len(os.listdir("/proc/self/fd"))
from nrtrewrite.cli import main
for _ in range(2):
    try:
        main(sys.argv[2:], prog_name="nrtrewrite", standalone_mode=sys.argv[1] == "standalone")
        code = 0
    except SystemExit as exc:
        code = exc.code
    was, now = os.fstat(keep), os.fstat(1)
    same = (was.st_dev, was.st_ino) == (now.st_dev, now.st_ino)
    try:
        os.write(1, b"x")
        wrote = "written"
    except OSError as exc:
        wrote = type(exc).__name__
    print(code, same, wrote, len(os.listdir("/proc/self/fd")) - fds, file=sys.stderr)
"""


@pytest.mark.parametrize("mode", ["standalone", "not standalone"])
@pytest.mark.parametrize("args", [["inspect", FIX / "mix8.neff"], ["--help"]])
def test_a_program_calling_main_into_a_closed_pipe_keeps_its_standard_output(mode, args):
    """Review 56r: after a closed pipe the CLI points descriptor 1 at /dev/null (so that the
    exit's flush raises nothing), and left it so for good: a program calling ``cli.main``
    wrote into /dev/null from then on, its own closed pipe unnoticed.  When ``main`` returns
    (raises SystemExit) in a program, descriptor 1 is the program's file again (the pipe: a
    write raises BrokenPipeError, as Python ignores SIGPIPE), no descriptor kept, each
    time; the command's status is 141 (CLI.md "Errors")."""
    r, w = os.pipe()
    os.close(r)
    try:
        proc = subprocess.run([sys.executable, "-c", _CALLER_OF_MAIN, mode, *map(str, args)],
                              stdout=w, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                              env=env(), timeout=120)
    finally:
        os.close(w)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "141 True BrokenPipeError 0\n" * 2


#: a sitecustomize for :func:`test_a_closed_pipe_is_still_141_quietly_with_stdout_put_back`:
#: writes to the file $FD1_SEEN, from the first exit handler Python runs (the last
#: registered: nrtrewrite registers none after it), whether descriptor 1 is then the file it
#: was at startup (by st_dev and st_ino)
_FD1_AT_EXIT = r"""
import atexit, os
_keep = os.dup(1)
def _seen():
    was, now = os.fstat(_keep), os.fstat(1)
    with open(os.environ["FD1_SEEN"], "w") as fh:
        fh.write("the pipe" if (was.st_dev, was.st_ino) == (now.st_dev, now.st_ino)
                 else "another file")
atexit.register(_seen)
"""


@pytest.mark.parametrize("module", ["nrtrewrite", "nrtrewrite.cli"])
def test_a_closed_pipe_is_still_141_quietly_with_stdout_put_back(module, tmp_path):
    """``python -m nrtrewrite.cli`` runs ``main`` as a program would: the descriptor is put
    back before the process exits (``_unquiet_closed_pipe``; seen from an exit handler: the
    pipe again, not /dev/null), and yet the status is 141, nothing printed, no
    BrokenPipeError at exit (what stdout held was flushed into /dev/null first).  For
    ``python -m nrtrewrite`` (the console script's process, which ends with the command and
    puts nothing back: its last exit handler ends the process, so the one here does not
    run) it is a guard: 141, quietly."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_FD1_AT_EXIT)
    seen = tmp_path / "seen"
    e = env(FD1_SEEN=seen)
    e["PYTHONPATH"] = str(site) + os.pathsep + e["PYTHONPATH"]
    r, w = os.pipe()
    os.close(r)
    try:
        proc = subprocess.run([sys.executable, "-m", module, "inspect", FIX / "mix8.neff"],
                              stdout=w, stderr=subprocess.PIPE, cwd=ROOT, env=e,
                              timeout=120)
    finally:
        os.close(w)
    assert (proc.returncode, proc.stderr) == (141, b"")
    if module == "nrtrewrite.cli":
        assert seen.read_text() == "the pipe"
    else:
        assert not seen.exists()


CLOSED = "nrtrewrite: error: cannot write the standard output: the standard output is closed\n"


@pytest.mark.parametrize("args", [
    ["inspect", FIX / "ar2.neff"],
    ["explain", FIX / "ar2.neff", "--json"],
    ["--version"],
    ["lower", "--help"],
])
def test_a_closed_standard_output_is_an_error_not_silence(args):
    """Started with descriptor 1 closed (``>&-``), Python has no ``sys.stdout`` and click
    would drop the printout without a word and exit 0."""
    proc = subprocess.run([sys.executable, "-m", "nrtrewrite", *map(str, args)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          cwd=ROOT, env=env(), timeout=120,
                          preexec_fn=lambda: os.close(1))
    assert (proc.returncode, proc.stderr) == (2, CLOSED)


def test_a_closed_standard_output_does_not_stop_a_quiet_lower(tmp_path):
    """``lower -q`` prints nothing: its output is the folder, written whole."""
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "nrtrewrite", "lower", "-q",
                           str(FIX / "ar2.neff"), "-o", str(out)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          cwd=ROOT, env=env(), timeout=120, preexec_fn=lambda: os.close(1))
    assert (proc.returncode, proc.stderr) == (0, "")
    verify_complete(out)


def test_a_subprocess_reports_an_internal_error_in_one_line(tmp_path):
    """The same through the console entry point (no CliRunner): an exception injected by a
    sitecustomize into the emitter."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import nrtrewrite.lower as L\n"
        "def _boom(*a, **kw):\n"
        "    raise ZeroDivisionError('injected')\n"
        "L._emit_batch = _boom\n")
    out = tmp_path / "work" / "out"
    out.parent.mkdir()
    e = env()
    e["PYTHONPATH"] = str(site) + os.pathsep + e["PYTHONPATH"]
    proc = subprocess.run([sys.executable, "-m", "nrtrewrite", "lower", "-q",
                           str(FIX / "ar2.neff"), "-o", str(out)], capture_output=True,
                          text=True, cwd=ROOT, env=e, timeout=120)
    assert proc.returncode == EXIT_INTERNAL_ERROR
    assert proc.stderr == ("nrtrewrite: internal error: ZeroDivisionError: injected (a bug in "
                           "nrtrewrite; rerun with --traceback for the details and report it)\n")
    assert list(out.parent.iterdir()) == []
    proc = subprocess.run([sys.executable, "-m", "nrtrewrite", "--traceback", "lower", "-q",
                           str(FIX / "ar2.neff"), "-o", str(out)], capture_output=True,
                          text=True, cwd=ROOT, env=e, timeout=120)
    assert proc.returncode == EXIT_INTERNAL_ERROR
    assert "Traceback (most recent call last):" in proc.stderr
    assert "ZeroDivisionError: injected\n" in proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        "nrtrewrite: internal error: ZeroDivisionError: injected (a bug in nrtrewrite; rerun "
        "with --traceback for the details and report it)")
    assert list(out.parent.iterdir()) == []


@pytest.mark.parametrize("args,doc", [
    (["inspect", "/nonexistent.neff", "--json"],
     {"format": "nrtrewrite.inspect/1", "file": "/nonexistent.neff",
      "error": "/nonexistent.neff: cannot read: No such file or directory"}),
    (["explain", "--op", "allreduce", "--bytes", "1x", "--ranks", "4", "--json"],
     {"model": None, "error": "field --bytes: bad size '1x' (e.g. 4096, 512KiB, 64MiB, 1GB)",
      "warnings": [], "triggers": []}),
    (["explain", "/nonexistent.neff", "--json"],
     {"model": None, "error": "Invalid value for 'MODEL': File '/nonexistent.neff' does not "
                              "exist.", "warnings": [], "triggers": []}),
    (["schedule", str(FIX / "ar2.neff"), "--rank", "2", "--json"],
     {"rank": 2, "ops": [], "error": f"{FIX / 'ar2.neff'}: field --rank: rank 2 is not in the "
                                     "model's world (ranks 0..1)"}),
    (["schedule", str(FIX / "ar2.neff"), "--json", "--rank", "x"],
     {"rank": None, "ops": [], "error": "Invalid value for '--rank': 'x' is not a valid "
                                        "integer."}),
    (["dump", "--spad", "--dma", str(FIX), "--json"],
     {"kind": None, "ranks": [], "error": "--spad and --dma are exclusive: choose one "
                                          "selector"}),
    (["dump", "--sem", str(FIX), "--json"],
     {"kind": "sem", "ranks": [], "error": f"{FIX}: neither an nrtrewrite output folder nor a "
                                           "rank folder"}),
])
def test_json_commands_print_one_document_on_an_error(args, doc):
    """``inspect --json``, ``explain --json``, ``schedule --json`` and ``dump --json``
    printed nothing on stdout on an error (exit 2), where ``diff --json`` always gives one
    document: now each gives its own with ``error`` (the stderr line without its prefix)."""
    import json
    res = invoke(*args)
    assert res.exit_code == 2 and json.loads(res.stdout) == doc
    line, = res.stderr.splitlines()
    assert doc["error"] in line


@pytest.mark.parametrize("size", ["5i", "5iB", "1x"])
def test_a_bad_byte_count_says_what_one_looks_like(size):
    """``explain --bytes``: every malformed count (a binary ``i`` without its unit prefix as
    well as an unknown unit) is refused with the examples of what a count looks like."""
    res = invoke("explain", "--op", "allreduce", "--bytes", size, "--ranks", "4")
    assert one_line(res, 2) == (f"nrtrewrite: error: field --bytes: bad size {size!r} "
                                "(e.g. 4096, 512KiB, 64MiB, 1GB)")


def test_line_and_direction_controls_are_escaped():
    """U+2028 / U+2029 (a terminal may break the line there) and the bidirectional controls
    (they reorder what follows on screen) were printed raw in error lines and diff lines."""
    from nrtrewrite.errors import escape_controls
    assert escape_controls("a\u2028b\u2029c\u202ed\u2066e\u200ff\n\x1b\x85é权") == \
        "a\\u2028b\\u2029c\\u202ed\\u2066e\\u200ff\\n\\x1b\\x85é权"
    # U+061C ARABIC LETTER MARK, the bidirectional control outside U+2000 (review 48p)
    assert escape_controls("a\u061cb") == "a\\u061cb"


@pytest.mark.parametrize("cmd", [["lower", str(FIX / "ar2.neff"), "-o", ".", "-q"],
                                 ["lower", str(FIX / "ar2.neff"), "-o", "sub", "-q"],
                                 ["assemble", str(FIX / "ar2.yaml"), "-o", "x.neff"]])
def test_a_working_folder_removed_while_in_use_is_one_line(tmp_path, cmd):
    """Found by an exploratory tester: in a shell whose folder was removed (``lower -o .
    --force`` of an empty folder can do it), a relative output was an internal error,
    status 70 (``os.path.abspath`` raised a FileNotFoundError that names no path)."""
    gone = tmp_path / "gone"
    gone.mkdir()

    def in_removed_folder():
        os.chdir(gone)
        os.rmdir(gone)
    # (PYTHONPATH without an empty entry: Python itself cannot start with one there)
    res = subprocess.run([sys.executable, "-m", "nrtrewrite", *cmd], capture_output=True,
                         text=True, env=dict(env(), PYTHONPATH=str(ROOT)), timeout=120,
                         preexec_fn=in_removed_folder)
    assert (res.returncode, res.stdout, res.stderr.count("\n")) == (2, "", 1), res.stderr
    if cmd[-2:] == ["sub", "-q"]:  # its own check names the output it cannot make
        assert res.stderr.startswith("nrtrewrite: error: sub: cannot write the output: No such "
                                     "file or directory")
    else:
        assert res.stderr == ("nrtrewrite: error: the working folder cannot be used (removed "
                              "while in use?): No such file or directory; cd to a folder that "
                              "exists\n")
    assert sorted(os.listdir(tmp_path)) == []


#: an internal error's ``"error"`` in a ``--json`` error document: ``Type: message``, the
#: message escaped once, as the line on stderr shows it (docs/CLI.md "Errors")
INTERNAL_WHY = "ValueError: a bad value\\non two lines"


def _boom(*a, **kw):
    raise ValueError("a bad value\non two lines")


@pytest.mark.parametrize("target,args,doc", [
    ("nrtrewrite.cli.inspect:model_to_dict", ["inspect", FIX / "ar2.neff", "--json"],
     {"format": "nrtrewrite.inspect/1", "file": str(FIX / "ar2.neff"), "error": INTERNAL_WHY}),
    ("nrtrewrite.cli.explain:explain_selection", ["explain", FIX / "ar2.neff", "--json"],
     {"model": str(FIX / "ar2.neff"), "error": INTERNAL_WHY, "warnings": [], "triggers": []}),
    ("nrtrewrite.cli.schedule:schedule_ops",
     ["schedule", FIX / "ar2.neff", "--rank", "0", "--json"],
     {"rank": 0, "ops": [], "error": INTERNAL_WHY}),
    ("nrtrewrite.simulate.engine:Simulator.execute", ["simulate", "OUT", "--json"],
     {"format": "nrtrewrite-simulate", "format_version": 1, "output": "OUT", "seed": 0,
      "ok": None, "error": INTERNAL_WHY, "error_trigger": None, "warnings": [], "triggers": [],
      "stats": {}}),
])
def test_an_internal_error_still_prints_the_json_error_document(
        tmp_path, monkeypatch, target, args, doc):
    """docs/CLI.md "Errors": with ``--json`` stdout is one document whatever happens.  An
    internal error (exit 70) of ``inspect``, ``explain`` and ``simulate`` (and ``schedule``'s
    before its document begins) left stdout empty until 2026-12-06: now the command's own
    error document, ``"error"`` the line's ``Type: message``."""
    import importlib
    import json
    out = tmp_path / "out"
    if "OUT" in args:
        assert invoke("lower", "-q", FIX / "ar2.neff", "-o", out).exit_code == 0
        args = [out if a == "OUT" else a for a in args]
        doc = {**doc, "output": str(out)}
    module, _, path = target.partition(":")  # (module:name or module:Class.name)
    owner = importlib.import_module(module)
    *classes, name = path.split(".")
    for cls in classes:
        owner = getattr(owner, cls)
    monkeypatch.setattr(owner, name, _boom)
    res = invoke(*args)
    assert res.exit_code == EXIT_INTERNAL_ERROR, (res.stdout, res.stderr, res.exception)
    assert res.stderr.splitlines() == [INTERNAL]
    assert json.loads(res.stdout) == doc


def test_a_streamed_document_closed_by_an_internal_error_is_not_printed_twice(monkeypatch):
    """``schedule --json`` closes its begun document with the internal error's ``"error"``:
    no second (error) document follows it."""
    import json

    import nrtrewrite.cli.schedule as sched
    real = sched.schedule_ops

    def ops(*a, **kw):
        yield from real(*a, **kw)
        _boom()
    monkeypatch.setattr(sched, "schedule_ops", ops)
    res = invoke("schedule", FIX / "ar2.neff", "--rank", "0", "--json")
    assert res.exit_code == EXIT_INTERNAL_ERROR
    doc = json.loads(res.stdout)  # (one document: a second would be "Extra data")
    assert doc["error"] == INTERNAL_WHY and doc["rank"] == 0 and doc["ops"]


def _oom_why(command: str) -> str:
    """The ``"error"`` of a ``--json`` document stopped by a ``MemoryError``: the line on
    stderr (docs/CLI.md "Errors") without its ``nrtrewrite: error: `` prefix."""
    return (f"out of memory: 'nrtrewrite {command}' needed more memory than the machine gave "
            "it (MemoryError; rerun with --traceback to see where)")


def _raise(exc: BaseException):
    def fail(*a, **kw):
        raise exc
    return fail


def _patch(monkeypatch, target: str, replacement) -> None:
    import importlib
    module, _, path = target.partition(":")  # (module:name or module:Class.name)
    owner = importlib.import_module(module)
    *classes, name = path.split(".")
    for cls in classes:
        owner = getattr(owner, cls)
    monkeypatch.setattr(owner, name, replacement)


@pytest.mark.parametrize("target,args,doc", [
    ("nrtrewrite.cli.inspect:model_to_dict", ["inspect", FIX / "ar2.neff", "--json"],
     {"format": "nrtrewrite.inspect/1", "file": str(FIX / "ar2.neff"),
      "error": _oom_why("inspect")}),
    ("nrtrewrite.cli.explain:explain_selection", ["explain", FIX / "ar2.neff", "--json"],
     {"model": str(FIX / "ar2.neff"), "error": _oom_why("explain"), "warnings": [],
      "triggers": []}),
    ("nrtrewrite.cli.schedule:schedule_ops",
     ["schedule", FIX / "ar2.neff", "--rank", "0", "--json"],
     {"rank": 0, "ops": [], "error": _oom_why("schedule")}),
    ("nrtrewrite.cli.dump:rank_dirs", ["dump", "OUT", "--spad", "--json"],
     {"kind": "spad", "ranks": [], "error": _oom_why("dump")}),
    ("nrtrewrite.simulate.engine:Simulator.execute", ["simulate", "OUT", "--json"],
     {"format": "nrtrewrite-simulate", "format_version": 1, "output": "OUT", "seed": 0,
      "ok": None, "error": _oom_why("simulate"), "error_trigger": None, "warnings": [],
      "triggers": [],
      "stats": {}}),
])
def test_out_of_memory_still_prints_the_json_error_document(
        tmp_path, monkeypatch, target, args, doc):
    """Fixer 49m: with ``--json`` a ``MemoryError`` (exit 71) left stdout empty, where an
    internal error (exit 70) prints the command's error document; now 71 prints it too,
    ``"error"`` the line on stderr without its ``nrtrewrite: error: `` prefix, as exit 2's."""
    import json
    out = tmp_path / "out"
    if "OUT" in args:
        assert invoke("lower", "-q", FIX / "ar2.neff", "-o", out).exit_code == 0
        args = [out if a == "OUT" else a for a in args]
        if "output" in doc:
            doc = {**doc, "output": str(out)}
    _patch(monkeypatch, target, _raise(MemoryError()))
    res = invoke(*args)
    assert res.exit_code == EXIT_OUT_OF_MEMORY, (res.stdout, res.stderr, res.exception)
    assert res.stderr.splitlines() == [f"nrtrewrite: error: {doc['error']}"]
    assert json.loads(res.stdout) == doc


def test_a_thread_refused_prints_the_json_error_document_with_its_line(monkeypatch):
    """The system refusing a thread is status 71 as well (docs/CLI.md "Errors"): its line's
    text is the document's ``"error"``."""
    import json
    _patch(monkeypatch, "nrtrewrite.cli.inspect:model_to_dict",
           _raise(RuntimeError("can't start new thread")))
    res = invoke("inspect", FIX / "ar2.neff", "--json")
    why = ("out of a system resource: 'nrtrewrite inspect' could not start a thread "
           "(RuntimeError: can't start new thread): the limit on processes and threads "
           "(ulimit -u) or on memory is reached")
    assert res.exit_code == EXIT_OUT_OF_MEMORY
    assert res.stderr == f"nrtrewrite: error: {why}\n"
    assert json.loads(res.stdout) == {"format": "nrtrewrite.inspect/1",
                                      "file": str(FIX / "ar2.neff"), "error": why}


def test_a_streamed_document_closed_by_out_of_memory_is_not_printed_twice(monkeypatch):
    """``schedule --json`` closes its begun document on a ``MemoryError`` with the same
    ``"error"`` as the error document (the line's text; until 2026-12-06 ``"MemoryError"``)
    and no second document follows."""
    import json

    import nrtrewrite.cli.schedule as sched
    real = sched.schedule_ops

    def ops(*a, **kw):
        yield from real(*a, **kw)
        raise MemoryError()
    monkeypatch.setattr(sched, "schedule_ops", ops)
    res = invoke("schedule", FIX / "ar2.neff", "--rank", "0", "--json")
    assert res.exit_code == EXIT_OUT_OF_MEMORY
    doc = json.loads(res.stdout)  # (one document: a second would be "Extra data")
    assert doc["error"] == _oom_why("schedule") and doc["rank"] == 0 and doc["ops"]


def _raised_while_handling(inner: BaseException, outer: BaseException) -> BaseException:
    """``outer`` as Python leaves it when raised in an ``except`` of ``inner``: its
    ``__context__`` is ``inner``."""
    try:
        try:
            raise inner
        except BaseException:
            raise outer
    except BaseException as err:  # noqa: BLE001
        return err


def _fail_at_rank_with(monkeypatch, make, rank: int = 3) -> None:
    """The emitter raises ``make()`` (a fresh exception with its chain) at ``rank``."""
    real = lower_mod._emit_batch

    def emit(builder, plan, batch, r, *a, **kw):
        if r == rank:
            raise make()
        return real(builder, plan, batch, r, *a, **kw)
    monkeypatch.setattr(lower_mod, "_emit_batch", emit)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_worker_exception_raised_out_of_memory_is_status_71_whatever_the_workers(
        tmp_path, monkeypatch, jobs):
    """Review 54g F3: a ``ValueError`` raised while a ``MemoryError`` was handled is out of
    memory (the chain holds a ``MemoryError``: CLI.md "Errors"), with -j 1 and -j 2 alike;
    the pool lost the chain (``RemoteTraceback`` took the place of ``__context__``), so
    -j 2 gave the internal error, status 70."""
    _fail_at_rank_with(monkeypatch, lambda: _raised_while_handling(
        MemoryError(), ValueError("cleanup failed after running out")))
    res = invoke("lower", "-q", FIX / "mix8.neff", "-o", tmp_path / "out", "-j", jobs)
    assert one_line(res, EXIT_OUT_OF_MEMORY) == (
        "nrtrewrite: error: out of memory: 'nrtrewrite lower' needed more memory than the "
        "machine gave it (MemoryError; rerun with --traceback to see where)")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_wrapped_interrupt_in_a_worker_is_an_interruption_whatever_the_workers(
        tmp_path, monkeypatch, jobs):
    """Review 54g F3: Python wraps an interrupt raised while a class is made in a
    ``RuntimeError`` (``__set_name__``), which the CLI takes as the interruption it is (status
    130, 128 + SIGINT); from a pool worker it was an internal error, status 70."""
    _fail_at_rank_with(monkeypatch, lambda: _raised_while_handling(
        KeyboardInterrupt(), RuntimeError("Error calling __set_name__ on 'Field' instance")))
    res = invoke("lower", "-q", FIX / "mix8.neff", "-o", tmp_path / "out", "-j", jobs)
    assert res.exit_code == 128 + 2, (res.exit_code, res.stderr)
    assert "internal error" not in res.stderr and "Traceback" not in res.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_library_that_cannot_be_mapped_in_a_worker_names_the_loaders_reason(
        tmp_path, monkeypatch, jobs):
    """Review 54g F4: the line's reason is the innermost exception's; a worker's chain ended
    in its ``RemoteTraceback``, whose text - the whole worker traceback, escaped - was
    printed as the reason (about 740 characters)."""
    fail_at_rank(monkeypatch, ImportError("libx.so: failed to map segment from shared object"))
    res = invoke("lower", "-q", FIX / "mix8.neff", "-o", tmp_path / "out", "-j", jobs)
    assert one_line(res, EXIT_OUT_OF_MEMORY) == (
        "nrtrewrite: error: out of memory: 'nrtrewrite lower' could not load its modules "
        "(ImportError: libx.so: failed to map segment from shared object): the memory or "
        "address-space limit (ulimit -v) is too small")


class _StrFails(Exception):
    def __str__(self):
        raise RuntimeError("no str")


@pytest.mark.parametrize("jobs", [1, 2])
def test_an_exception_whose_str_fails_is_still_one_line(tmp_path, monkeypatch, jobs):
    """Review 54g F5: the resource check read ``str()`` of the exception unguarded, so an
    exception whose ``__str__`` fails escaped the handler (a raw traceback, status 1); the
    internal error's line names its type alone, as ``_one_line`` does."""
    fail_at_rank(monkeypatch, _StrFails())
    res = invoke("lower", "-q", FIX / "mix8.neff", "-o", tmp_path / "out", "-j", jobs)
    assert one_line(res, EXIT_INTERNAL_ERROR) == (
        "nrtrewrite: internal error: _StrFails (a bug in nrtrewrite; rerun with --traceback "
        "for the details and report it)")
    assert list(tmp_path.iterdir()) == []
