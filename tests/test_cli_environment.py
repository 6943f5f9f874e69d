"""The CLI under the environments CI machines give it (docs/CLI.md "Errors", docs/RELIABILITY.md
§4): a non-UTF-8 standard output, a standard error that cannot be written, FORCE_COLOR and
COLUMNS, limits on memory, processes and threads, Ctrl-C while the modules load, a read-only
previous output, file names with line breaks."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nrtrewrite import bundle, cores
from nrtrewrite.cli import EXIT_OUT_OF_MEMORY, _resource_line
from test_atomic_output import FIX, ROOT, env, verify_complete
from test_cli_errors import fail_at_rank, invoke, one_line


def cli(*args, stderr=subprocess.PIPE, **extra) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nrtrewrite", *map(str, args)],
                          stdout=subprocess.PIPE, stderr=stderr, cwd=ROOT, env=env(**extra),
                          timeout=120)


UNICODE_SPEC = """\
header: {name: "modèl-权重"}
subgraphs:
  - name: sg00
    vars:
      - {name: "grad_权重", type: input, size: 4KiB}
      - {name: "out_ş€", type: output, size: 4KiB}
    replica_groups: ["0..1"]
    engines:
      sp:
        - all_reduce: {dtype: bf16, op: add, src: "grad_权重", dst: "out_ş€", bytes: 4KiB}
      act: [nop]
      pool: [nop]
      pe: [nop]
      dve: [nop]
"""


def test_text_the_output_encoding_cannot_hold_is_escaped(tmp_path):
    """In a Latin-1 locale a var name in Chinese was an internal error (UnicodeEncodeError,
    status 70) half-way through the table; now it is escaped, as stderr escapes."""
    spec = tmp_path / "m.yaml"
    spec.write_text(UNICODE_SPEC, encoding="utf-8")
    model = tmp_path / "m.neff"
    assert cli("assemble", spec, "-o", model).returncode == 0
    proc = cli("inspect", model, PYTHONIOENCODING="latin-1")
    assert proc.returncode == 0, proc.stderr
    assert b"grad_\\u6743\\u91cd" in proc.stdout and b"out_\\u015f\\u20ac" in proc.stdout
    assert b"mod\xe8l-\\u6743\\u91cd" in proc.stdout  # (Latin-1 holds the e grave)
    assert b"Traceback" not in proc.stderr


def test_assemble_and_golden_escape_the_path_they_name(tmp_path):
    """`assemble`'s line and `nrtrewrite.golden`'s "written" printed the output path raw: a
    line break split the line, piped click stripped an ESC (`e\x1b[2Jx.neff` as `ex.neff`),
    and a Latin-1 stdout could not hold Chinese.  Escaped now as every other stdout path
    (CLI.md: "as Python writes them in a string"; `\u6743` as stderr escapes)."""
    spec = FIX / "ar2.yaml"
    for name, shown in (("a\nb.neff", b"a\\nb.neff"), ("e\x1b[2Jx.neff", b"e\\x1b[2Jx.neff"),
                        ("m\u6743.neff", b"m\\u6743.neff")):
        proc = cli("assemble", spec, "-o", tmp_path / name, PYTHONIOENCODING="latin-1")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == bytes(tmp_path) + b"/" + shown + b": 1439 bytes, 1 trigger\n"
        assert (tmp_path / name).read_bytes() == (FIX / "ar2.neff").read_bytes()
    golden = tmp_path / "g\nx.tgz"
    proc = subprocess.run([sys.executable, "-m", "nrtrewrite.golden", str(FIX / "ar2.neff"),
                           str(golden)], capture_output=True, cwd=ROOT, env=env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == bytes(tmp_path) + b"/g\\nx.tgz: written\n"
    assert golden.is_file()


def test_golden_refusing_to_replace_its_model_escapes_the_paths(tmp_path, capsys):
    """`nrtrewrite.golden MODEL MODEL` is refused in one line, status 2 (the output would be
    its input); a line break in the path is shown escaped (`a\\nb.neff`), as every path the
    CLI prints, so the refusal stays one line."""
    from nrtrewrite.golden import main as golden_main

    model = tmp_path / "a\nb.neff"
    model.write_bytes((FIX / "ar2.neff").read_bytes())
    with pytest.raises(SystemExit) as stop:
        golden_main([str(model), str(model)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    shown = f"{tmp_path}/a\\nb.neff"
    assert err == (f"nrtrewrite.golden: error: {shown}: the output is the model {shown} itself; "
                   "nrtrewrite never replaces its input: choose another output path\n")
    assert model.read_bytes() == (FIX / "ar2.neff").read_bytes()


def test_escaped_text_keeps_a_tables_columns_aligned(tmp_path):
    """An exploratory tester: text was escaped after rich laid the table out, so a row with
    an escaped name was wider than the others, and ``0x00\xd72`` (the ``×`` of a count)
    read as a number.  Every line of a table is as wide as its borders now."""
    spec = tmp_path / "m.yaml"
    spec.write_text(UNICODE_SPEC, encoding="utf-8")
    model = tmp_path / "m.neff"
    assert cli("assemble", spec, "-o", model).returncode == 0
    for enc, times in (("latin-1", "\u00d7"), ("ascii", "*")):  # Latin-1 holds the x sign
        proc = cli("inspect", model, PYTHONIOENCODING=enc)
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.decode(enc).splitlines()
        tables, cur = [], []  # a table: its consecutive lines of borders and rows
        for ln in lines + [""]:
            if ln[:1] in "+|":
                cur.append(ln)
            elif cur:
                tables.append(cur)
                cur = []
        assert len(tables) >= 4
        for t in tables:
            assert len({len(ln.rstrip()) for ln in t}) == 1, "\n".join(t)
        text = "\n".join(lines)
        assert "grad_\\u6743\\u91cd" in text and "\\xd7" not in text
        assert f"0x00{times}1" in text


def test_an_error_with_stderr_unwritable_keeps_its_status(tmp_path):
    """`diff` exits 2 on an error, 1 when the outputs differ: a standard error that cannot
    be written (2>/dev/full) loses the line, not the status (it was 1)."""
    with open("/dev/full", "w") as full:
        proc = cli("diff", FIX / "golden", tmp_path, stderr=full)
        assert proc.returncode == 2
        proc = cli("inspect", tmp_path / "missing.neff", stderr=full)
        assert proc.returncode == 2


def test_a_traceback_with_stderr_closed_keeps_stdout_and_the_status(tmp_path):
    """CLI.md "Errors": with --traceback and stderr closed (2>&-), the traceback went to
    stdout, into the --json document, and the status became 1 (an AttributeError flushing
    None).  Now there is no traceback: stdout is the one document, the status the error's
    own 2."""
    missing = tmp_path / "nope.neff"
    proc = subprocess.run(
        ["sh", "-c", 'exec "$0" -m nrtrewrite --traceback inspect "$1" --json 2>&-',
         sys.executable, str(missing)],
        stdout=subprocess.PIPE, cwd=ROOT, env=env(), timeout=120)
    assert proc.returncode == 2
    assert b"Traceback" not in proc.stdout
    doc = json.loads(proc.stdout)
    assert doc["file"] == str(missing) and doc["error"].startswith(f"{missing}: cannot read")


def test_redirected_output_ignores_force_color_and_columns(tmp_path):
    """FORCE_COLOR / TTY_COMPATIBLE made rich write its progress bar into a redirected
    stderr and colour codes into a redirected stdout; COLUMNS changed the width of
    `explain`'s piped tables.  Redirected, the bytes are now the same whatever they say."""
    outs = []
    for i, extra in enumerate(({}, {"FORCE_COLOR": "1", "TTY_COMPATIBLE": "1", "COLUMNS": "300"},
                               {"FORCE_COLOR": "0", "COLUMNS": "40"})):
        proc = cli("lower", FIX / "groups.neff", "-o", tmp_path / f"o{i}", **extra)
        assert proc.returncode == 0 and proc.stderr == b"", proc.stderr[:200]
        assert b"\x1b" not in proc.stdout
        ex = cli("explain", FIX / "groups.neff", **extra)
        assert ex.returncode == 0 and b"\x1b" not in ex.stdout
        outs.append(ex.stdout)
    assert outs[0] == outs[1] == outs[2]
    assert max(len(line) for line in outs[0].decode().splitlines()) == 132  # docs/CLI.md


def on_a_terminal(*args, **extra) -> tuple[int, str]:
    """``nrtrewrite ARGS`` with stdout and stderr a pty: its status and what it showed,
    colour codes taken out."""
    import pty
    import re
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "nrtrewrite", *map(str, args)],
                                stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, cwd=ROOT,
                                env=env(**extra))
        os.close(slave)
        seen = b""
        while True:
            try:
                got = os.read(master, 1 << 16)
            except OSError:  # EIO: the process has closed the terminal
                break
            if not got:
                break
            seen += got
        status = proc.wait(timeout=120)
    finally:
        os.close(master)
    return status, re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", seen.decode(errors="replace"))


def test_a_terminal_gets_the_progress_bar_and_the_table(tmp_path):
    """docs/CLI.md "lower": on a terminal (stdout and stderr a pty) `lower` of 16 ranks
    (in a pool of 2 workers) shows its progress bar, counting to 16/16, and then the summary
    table and the count of rank folders; the output is complete."""
    status, text = on_a_terminal("lower", FIX / "groups.neff", "-o", tmp_path / "o", "-j", "2",
                                 COLUMNS="120", LINES="40")
    assert status == 0, text[-2000:]
    assert "lowering" in text and "16/16" in text, text[-2000:]
    assert "16 rank folder(s) written" in text
    verify_complete(tmp_path / "o")


def test_a_terminal_width_is_held_to_80_through_1000_columns():
    """CLI.md "Output": on a terminal narrower than about 30 columns rich blanked whole
    columns of `explain`'s tables (at 24 the predicate and window, at 10 every cell) and cut
    the heading with "…"; `COLUMNS=99999999999` was out of memory (71) and 1000000 wrote
    megabytes of rule.  The width is held to 80 through 1000 columns: narrower is laid out
    at 80 (the terminal wraps the lines), wider at 1000."""
    args = ("explain", FIX / "mix8.neff", "--trigger", "0")
    status, at80 = on_a_terminal(*args, COLUMNS="80")
    assert status == 0, at80
    header = next(line for line in at80.splitlines() if "predicate" in line)
    assert header.split("┃")[1:] == [f" {c}".ljust(len(cell)) for c, cell in zip(
        ("engine", "predicate", "legal", "window", "lowerable", "reason"),
        header.split("┃")[1:])]  # every column named: none blanked
    hier = next(line for line in at80.splitlines() if "HIER (1)" in line)
    # HIER needs a group spanning nodes (DESIGN): not legal, so no window; lowerable
    assert [c.strip() for c in hier.split("│")] == ["", "HIER (1)", "enc_can_post_", "no",
                                                     "-", "yes", "group lies"]
    assert "…" not in at80
    for columns in ("24", "10"):
        status, text = on_a_terminal(*args, COLUMNS=columns)
        assert status == 0 and text == at80
    for columns in ("1000000", "99999999999"):
        status, text = on_a_terminal(*args, COLUMNS=columns)
        assert status == 0, text[-500:]
        assert max(len(line) for line in text.splitlines()) <= 1000
        assert len(text) < 64 * 1024 and "enc_can_post_" in text


def test_the_progress_bar_on_stderr_is_held_to_80_columns_too(tmp_path):
    """CLI.md "Output": the width is held to 80 through 1000 columns on stderr as on stdout.
    `lower`'s progress bar (stderr) on a terminal of 10 columns is laid out at 80, so its
    line ("lowering", a bar of 40, "16/16" and the time: under 80 columns) shows whole, the
    count included (laid out at 10 columns, the line is cut before the count)."""
    status, text = on_a_terminal("lower", FIX / "groups.neff", "-o", tmp_path / "o", "-j", "2",
                                 COLUMNS="10", LINES="40")
    assert status == 0, text[-2000:]
    assert "16/16" in text, text[-2000:]
    verify_complete(tmp_path / "o")


def _explain_ar2_with_subgraph(tmp_path, sub: str):
    """``explain --trigger 0`` (piped) of fixtures/ar2.yaml with its subgraph named ``sub``,
    exit 0."""
    spec = tmp_path / "m.yaml"
    spec.write_text((FIX / "ar2.yaml").read_text().replace("name: sg00", f"name: {sub}"))
    model = tmp_path / "m.neff"
    assert cli("assemble", spec, "-o", model).returncode == 0
    proc = cli("explain", model, "--trigger", "0")
    assert proc.returncode == 0, proc.stderr
    return proc


def test_an_explain_heading_wider_than_the_output_is_printed_whole(tmp_path):
    """rich's rule cut a heading wider than the output with "…" (a long subgraph name, piped
    at 132 columns): the heading is printed whole then, the rule under it."""
    sub = "s" * 150
    proc = _explain_ar2_with_subgraph(tmp_path, sub)
    lines = proc.stdout.decode().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("trigger 0"))
    rule = next(i for i in range(at, len(lines)) if set(lines[i]) == {"─"})
    assert len(lines[rule]) == 132  # (piped: the documented width)
    heading = "".join(lines[at:rule])  # (wrapped at 132 columns, a word cut where it must)
    assert re.fullmatch(f"trigger 0  {sub}/sp #[0-9]+  ALLREDUCE BF16 1 MiB  2 ranks \\(node 0\\)",
                        heading), heading
    assert "…" not in proc.stdout.decode()


@pytest.mark.parametrize("length", [73, 74, 75])
def test_an_explain_heading_at_the_outputs_width_is_whole_and_one_short_of_it_is_ruled(
        tmp_path, length):
    """The heading of a trigger, `trigger 0  SUB/sp #2  ALLREDUCE BF16 1 MiB  2 ranks
    (node 0)` (ar2.yaml's all-reduce: its sp stream's instruction 2, after two nops), is 57
    cells + the subgraph name. Piped (132 columns): 73 letters make it 130, with the rule
    beside it on its line (a rule needs its title and a space either side); 74 and 75 make
    131 and 132, printed whole on their line, the rule under it, never cut with "…"."""
    sub = "s" * length
    proc = _explain_ar2_with_subgraph(tmp_path, sub)
    lines = proc.stdout.decode().splitlines()
    heading = f"trigger 0  {sub}/sp #2  ALLREDUCE BF16 1 MiB  2 ranks (node 0)"
    assert len(heading) == 57 + length
    at = next(i for i, line in enumerate(lines) if line.startswith("trigger 0"))
    if length == 73:
        assert lines[at].startswith(heading + " ─") and len(lines[at]) == 132, lines[at]
        assert set(lines[at][len(heading) + 1:]) == {"─"}
    else:
        assert lines[at].rstrip() == heading
        assert lines[at + 1] == "─" * 132
    assert "…" not in proc.stdout.decode()


def test_diff_escapes_an_entry_name_with_a_line_break(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert invoke("lower", "-q", FIX / "ar2.neff", "-o", a).exit_code == 0
    shutil.copytree(a, b)
    (b / "evil\n[0] name: fake").write_text("x")
    res = invoke("diff", a, b)
    assert res.exit_code == 1
    assert res.stdout.splitlines() == ["evil\\n[0] name: fake file: False != True",
                                       "1 difference(s)"]


def test_force_refuses_a_read_only_previous_output(tmp_path, monkeypatch):
    """Replaced anyway, a read-only previous output could not be removed and stayed as a
    hidden sibling for good, the run exiting 0.  (os.access is patched: the tests may run as
    root, for whom every folder is writable - and removable.)"""
    out = tmp_path / "out"
    assert invoke("lower", "-q", FIX / "mix8.neff", "-o", out).exit_code == 0
    before = verify_complete(out)
    real = os.access
    for ro in (out, out / "rank-0003"):
        monkeypatch.setattr(bundle.os, "access",
                            lambda p, mode, ro=ro: False if Path(p) == ro else real(p, mode))
        res = invoke("lower", "-q", FIX / "mix8.neff", "-o", out, "--force")
        which = "it is a read-only folder" if ro == out else "its folder rank-0003 is read-only"
        assert one_line(res, 2) == (
            f"nrtrewrite: error: {out} cannot be replaced: {which}, so the previous output "
            f"could not be removed afterwards; make it writable (chmod -R u+w {out}) or "
            "remove it first")
        assert verify_complete(out) == before
        assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_force_names_the_folder_of_a_previous_output_it_cannot_list(tmp_path, monkeypatch):
    """A previous output (or one of its rank folders) that cannot be listed (no read
    permission: os.scandir is patched, the tests may run as root) is not replaced: one line
    naming OUT and which folder, nothing written.  A rank folder's refusal said "OUT: cannot
    list it", sending the user to OUT's permissions, which were fine."""
    import errno
    out = tmp_path / "out"
    assert invoke("lower", "-q", FIX / "ar2.neff", "-o", out).exit_code == 0
    before = verify_complete(out)
    real = os.scandir
    for denied, it in ((out, "it"), (out / "rank-0001", "its folder rank-0001")):
        def scandir(p=".", denied=denied):
            if Path(p) == denied:
                raise PermissionError(errno.EACCES, "Permission denied", os.fspath(p))
            return real(p)
        monkeypatch.setattr(bundle.os, "scandir", scandir)
        res = invoke("lower", "-q", FIX / "ar2.neff", "-o", out, "--force")
        assert one_line(res, 2) == (f"nrtrewrite: error: {out}: cannot list {it} (Permission "
                                    "denied); refusing to replace it")
        monkeypatch.setattr(bundle.os, "scandir", real)
        assert verify_complete(out) == before
        assert [p.name for p in tmp_path.iterdir()] == ["out"]


@pytest.mark.parametrize("case", ["read-only file system", "not searchable"])
def test_force_names_why_a_previous_output_cannot_be_removed(tmp_path, monkeypatch, case):
    """Found by an exploratory tester: on a file system mounted read-only, and for a folder
    writable but not searchable (mode 666), the refusal said "it is a read-only folder ...
    make it writable (chmod -R u+w ...)", which cannot help there.  (os.access and
    os.statvfs are patched: the tests may run as root, and mount nothing.)"""
    out = tmp_path / "out"
    assert invoke("lower", "-q", FIX / "mix8.neff", "-o", out).exit_code == 0
    before = verify_complete(out)
    real_access, real_statvfs = os.access, os.statvfs
    if case == "read-only file system":
        monkeypatch.setattr(bundle.os, "access", lambda p, mode: False if Path(p) == out
                            else real_access(p, mode))

        class Ro:
            f_flag = os.ST_RDONLY
        monkeypatch.setattr(bundle.os, "statvfs", lambda p: Ro() if Path(p) == out
                            else real_statvfs(p))
        why = "it is on a read-only file system, so the previous output could not be " \
              "removed afterwards; write the output elsewhere"
    else:
        monkeypatch.setattr(bundle.os, "access", lambda p, mode: (mode & os.X_OK) == 0
                            if Path(p) == out else real_access(p, mode))
        why = ("it cannot be searched (no x permission), so the previous output could not be "
               f"removed afterwards; chmod -R u+wx {out} or remove it first")
    res = invoke("lower", "-q", FIX / "mix8.neff", "-o", out, "--force")
    assert one_line(res, 2) == f"nrtrewrite: error: {out} cannot be replaced: {why}"
    assert verify_complete(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


@pytest.mark.parametrize("exc, want", [
    (RuntimeError("can't start new thread"),
     "could not start a thread (RuntimeError: can't start new thread): the limit on processes "
     "and threads (ulimit -u) or on memory is reached"),
    (BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable"),
     "could not start a process or map memory (Resource temporarily unavailable): the limit "
     "on processes (ulimit -u) or on memory is reached (lower -j 1 starts no process)"),
])
def test_a_thread_or_process_refused_is_one_line_exit_71(tmp_path, monkeypatch, exc, want):
    """Under a limit on processes the fsync thread or a worker's fork was refused: an
    internal error (70), or 'cannot write the output' (2) for a fork."""
    fail_at_rank(monkeypatch, exc)
    res = invoke("lower", "-q", FIX / "mix8.neff", "-o", tmp_path / "out", "-j", 1)
    assert one_line(res, EXIT_OUT_OF_MEMORY) == \
        f"nrtrewrite: error: out of a system resource: 'nrtrewrite lower' {want}"
    assert list(tmp_path.iterdir()) == []


def test_resource_lines_read_the_exception_chain():
    # numpy's import under `ulimit -v`: an ImportError raised from the loader's
    try:
        try:
            raise ImportError("libopenblas.so: failed to map segment from shared object")
        except ImportError as inner:
            raise ImportError("IMPORTANT: PLEASE READ THIS ...") from inner
    except ImportError as err:
        line = _resource_line(err, "nrtrewrite lower")
    assert line == ("nrtrewrite: error: out of memory: 'nrtrewrite lower' could not load its "
                    "modules (ImportError: libopenblas.so: failed to map segment from shared "
                    "object): the memory or address-space limit (ulimit -v) is too small")
    assert _resource_line(ImportError("No module named 'x'"), "nrtrewrite") is None
    assert _resource_line(OSError(errno.EAGAIN, "again", "/a/file"), "nrtrewrite") is None
    assert _resource_line(ValueError("x"), "nrtrewrite") is None
    wrapped = RuntimeError("outer")
    wrapped.__cause__ = MemoryError()
    assert _resource_line(wrapped, "nrtrewrite diff").startswith(
        "nrtrewrite: error: out of memory: 'nrtrewrite diff' needed more memory")


def test_an_address_space_limit_while_loading_is_one_line(tmp_path):
    """`ulimit -v` too small for numpy's libraries: the import failed with numpy's banner as
    an internal error (status 70), or with a traceback."""
    proc = subprocess.run(
        ["sh", "-c", f'ulimit -v 60000 && exec "{sys.executable}" -m nrtrewrite lower -q '
                     f'"{FIX / "ar2.neff"}" -o "{tmp_path / "out"}"'],
        capture_output=True, cwd=ROOT, env=env(), timeout=120)
    err = proc.stderr.decode()
    if proc.returncode == 0:
        pytest.skip("60 MB of address space was enough here")
    assert proc.returncode == EXIT_OUT_OF_MEMORY, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("nrtrewrite: error: out of memory: 'nrtrewrite lower' ")
    assert not (tmp_path / "out").exists()


def test_ctrl_c_while_the_modules_load_is_aborted_not_a_traceback():
    """The console script's first tenths of a second (click, rich, numpy being imported,
    before the CLI's own handling) printed a KeyboardInterrupt traceback.  The interrupt is
    made to land there: an import hook raises it when nrtrewrite.cli is imported."""
    code = (
        "import sys\n"
        "class Interrupt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'nrtrewrite.cli':\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, Interrupt())\n"
        "sys.argv = ['nrtrewrite', 'inspect', 'm.neff']\n"
        "from nrtrewrite.console import main\n"
        "main()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=ROOT,
                          env=env(), timeout=60)
    assert (proc.returncode, proc.stderr) == (130, b"Aborted!\n")


@pytest.mark.parametrize("given, want", [(None, "1"), ("4", "4")])
def test_the_console_script_keeps_blas_to_one_thread_unless_set(monkeypatch, given, want):
    """CLI.md "Errors": numpy's BLAS starts no threads of its own, `OPENBLAS_NUM_THREADS=1`
    unless set (a value given is kept)."""
    import nrtrewrite.cli
    from nrtrewrite import console

    if given is None:
        monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", given)
    seen = []
    monkeypatch.setattr(nrtrewrite.cli, "main",
                        lambda **kw: seen.append(os.environ.get("OPENBLAS_NUM_THREADS")))
    # (console.main sets it for its own process: put back for the tests after this one, whose
    # commands would otherwise hand a late Ctrl-C to _late_stop, which ends the process)
    monkeypatch.setattr(nrtrewrite.cli, "LATE_STOPS_END_THE_PROCESS", False)
    console.main()
    assert seen == [want]


def test_usable_cores_follow_the_affinity_and_the_quota(tmp_path, monkeypatch):
    monkeypatch.setattr(cores.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5})
    monkeypatch.setattr(cores, "cgroup_cpu_quota", lambda: None)
    assert cores.usable_cores() == 6
    monkeypatch.setattr(cores, "cgroup_cpu_quota", lambda: 1.5)
    assert cores.usable_cores() == 2
    monkeypatch.setattr(cores, "cgroup_cpu_quota", lambda: 0.2)
    assert cores.usable_cores() == 1


def test_cgroup_quota_files(tmp_path):
    root = tmp_path / "cg"
    (root / "a" / "b").mkdir(parents=True)
    proc = tmp_path / "cgroup"
    proc.write_text("0::/a/b\n")
    assert cores.cgroup_cpu_quota(root, proc) is None  # no cpu.max anywhere
    (root / "a" / "b" / "cpu.max").write_text("max 100000\n")
    assert cores.cgroup_cpu_quota(root, proc) is None  # no quota
    (root / "a" / "cpu.max").write_text("250000 100000\n")  # a parent's quota binds too
    assert cores.cgroup_cpu_quota(root, proc) == 2.5
    (root / "a" / "b" / "cpu.max").write_text("50000 100000\n")
    assert cores.cgroup_cpu_quota(root, proc) == 0.5
    v1 = tmp_path / "v1"
    (v1 / "cpu,cpuacct" / "x").mkdir(parents=True)
    (v1 / "cpu,cpuacct" / "x" / "cpu.cfs_quota_us").write_text("300000\n")
    (v1 / "cpu,cpuacct" / "x" / "cpu.cfs_period_us").write_text("100000\n")
    (v1 / "cpu,cpuacct" / "cpu.cfs_quota_us").write_text("-1\n")
    (v1 / "cpu,cpuacct" / "cpu.cfs_period_us").write_text("100000\n")
    proc.write_text("4:cpu,cpuacct:/x\n1:name=systemd:/\n")
    assert cores.cgroup_cpu_quota(v1, proc) == 3.0
    assert cores.cgroup_cpu_quota(v1, tmp_path / "missing") is None


def test_cgroup_v1_cpu_controller_found_under_its_cpu_mount(tmp_path):
    """CLI.md "lower": `-j`'s default is capped by a cgroup CPU quota; cgroup v1 mounts the
    joint `cpu,cpuacct` controller as `cpu,cpuacct` or only as `cpu`: the quota is read from
    whichever is there."""
    v1 = tmp_path / "v1"
    (v1 / "cpu" / "x").mkdir(parents=True)
    (v1 / "cpu" / "x" / "cpu.cfs_quota_us").write_text("150000\n")
    (v1 / "cpu" / "x" / "cpu.cfs_period_us").write_text("100000\n")
    proc = tmp_path / "cgroup"
    proc.write_text("4:cpu,cpuacct:/x\n")
    assert cores.cgroup_cpu_quota(v1, proc) == 1.5


@pytest.mark.parametrize("fails", [AttributeError, OSError])
def test_usable_cores_without_an_affinity_mask_count_the_machine(monkeypatch, fails):
    """Where there is no affinity mask (not Linux: no ``os.sched_getaffinity``) or it cannot
    be read, the machine's CPUs count, still capped by the quota; none known: 1."""
    def no_mask(pid):
        raise fails("no affinity mask")

    monkeypatch.setattr(cores.os, "sched_getaffinity", no_mask, raising=False)
    monkeypatch.setattr(cores, "cgroup_cpu_quota", lambda: None)
    monkeypatch.setattr(cores.os, "cpu_count", lambda: 12)
    assert cores.usable_cores() == 12
    monkeypatch.setattr(cores, "cgroup_cpu_quota", lambda: 2.5)
    assert cores.usable_cores() == 3
    monkeypatch.setattr(cores, "cgroup_cpu_quota", lambda: None)
    monkeypatch.setattr(cores.os, "cpu_count", lambda: None)
    assert cores.usable_cores() == 1


def test_cgroup_lines_without_a_path_or_a_mounted_cpu_controller_are_skipped(tmp_path):
    """/proc/self/cgroup lines that name no cgroup path, and a v1 cpu controller mounted
    nowhere under the root, give no quota; the v2 line beside them still counts."""
    root = tmp_path / "cg"
    (root / "a").mkdir(parents=True)
    (root / "a" / "cpu.max").write_text("300000 100000\n")
    proc = tmp_path / "cgroup"
    proc.write_text("garbage\n5:cpu,cpuacct:/x\n0::/a\n")  # no cpu,cpuacct or cpu folder
    assert cores.cgroup_cpu_quota(root, proc) == 3.0
    proc.write_text("garbage\n5:cpu,cpuacct:/x\n")
    assert cores.cgroup_cpu_quota(root, proc) is None


def test_a_killed_simulates_temporary_folder_is_removed_by_the_next(tmp_path):
    """`simulate MODEL.neff` lowers into TMPDIR/nrtrewrite-simulate-*; a SIGKILLed run left
    it there for good.  The next run removes those of this user that are more than a minute
    old and whose lock no live run holds, named exactly as mkdtemp names them: a user's
    ``nrtrewrite-simulate-my-results`` was removed too."""
    import fcntl
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    old = time.time() - 2 * bundle.STALE_AFTER_S
    # (mkdtemp's names: the prefix and 8 of "abcdefghijklmnopqrstuvwxyz0123456789_")
    stale, live, young = (tmpdir / f"nrtrewrite-simulate-{n}"
                          for n in ("a1_b2c3d", "b2c3d4e5", "c3d4e5f6"))
    other = tmpdir / "nrtrewrite-golden-x"
    # a user's folders of the prefix but not of mkdtemp's shape: kept however old
    mine = [tmpdir / f"nrtrewrite-simulate-{n}"
            for n in ("my-results", "a1b2c3d", "a1b2c3d4e", "A1B2C3D4", "a1b2c3d4\n")]
    for d in (stale, live, young, other, *mine):
        (d / "m.lowered").mkdir(parents=True)
        if d is not young:
            os.utime(d, (old, old))
    link = tmpdir / "nrtrewrite-simulate-linklink"
    link.symlink_to(other)
    fd = os.open(live, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as a running simulate holds it
        proc = cli("simulate", FIX / "ar2.neff", TMPDIR=tmpdir)
        assert proc.returncode == 0, proc.stderr
        assert sorted(p.name for p in tmpdir.iterdir()) == sorted(
            p.name for p in (live, young, other, link, *mine))
        assert all((d / "m.lowered").is_dir() for d in mine)
    finally:
        os.close(fd)
    assert bundle.clean_stale_simulate_temps(tmpdir) == [live]


def test_simulates_temporary_folder_is_the_owners_under_any_umask(tmp_path, monkeypatch):
    """Under `umask 777` mkdtemp made simulate's folder mode 000: a user without root's
    file-permission override could neither write into it nor list it to remove it, so it
    stayed in TMPDIR for good (CLI.md: "the folder is removed afterwards").  It is 0700
    whatever the umask (root bypasses the modes: the mode is what is asserted)."""
    import stat
    from nrtrewrite.cli import simulate as simulate_cli
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    modes = []
    real = simulate_cli.lock_folder

    def spy(path):
        modes.append(stat.S_IMODE(os.stat(path).st_mode))
        return real(path)
    monkeypatch.setattr(simulate_cli, "lock_folder", spy)
    umask = os.umask(0o777)
    try:
        res = invoke("simulate", FIX / "ar2.neff")
    finally:
        os.umask(umask)
    assert modes == [0o700]
    if os.geteuid() == 0:  # (others cannot write the lowered output under umask 777)
        assert res.exit_code == 0, res.output
    assert list(tmpdir.iterdir()) == []


def test_force_says_when_the_previous_output_cannot_be_removed(tmp_path):
    """An immutable file in the previous output (chattr +i, root only): --force put the new
    output in place and exited 0 saying nothing, the old one hidden as a sibling for good.
    Now a warning names it."""
    out = tmp_path / "out"
    assert invoke("lower", "-q", FIX / "mix8.neff", "-o", out).exit_code == 0
    pinned = out / "rank-0001" / "dma.bin"
    if subprocess.run(["chattr", "+i", str(pinned)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here (not root, or the file system)")
    try:
        res = invoke("lower", "-q", FIX / "mix8.neff", "-o", out, "--force", "--algo", "ring")
        assert res.exit_code == 0, res.output
        (left,) = [p for p in tmp_path.iterdir() if p.name != "out"]
        assert res.stderr == (
            f"nrtrewrite: warning: {out}: the new output is in place, but the previous one, "
            f"moved aside to {left.name}, could not be removed whole ({left}/rank-0001/"
            "dma.bin: Operation not permitted); remove it by hand\n")
        verify_complete(out)
        assert json.loads((out / "manifest.json").read_text())["options"]["algo"] == "ring"
    finally:
        for p in tmp_path.rglob("dma.bin"):
            subprocess.run(["chattr", "-i", str(p)], capture_output=True)


def test_a_signal_during_the_last_cleanup_waits_for_it(tmp_path, monkeypatch):
    """Ctrl-C landing while simulate removed its temporary folder on the way out cut the
    removal short and left the folder (the CI tester: 6 of 40 runs under load)."""
    tree = tmp_path / "t"
    for i in range(5):
        (tree / f"d{i}").mkdir(parents=True)
        (tree / f"d{i}" / "f").write_text("x")
    real = shutil.rmtree
    calls = []

    def interrupted(path, *a, **kw):
        calls.append(path)
        if len(calls) == 1:  # the signal's exception, half-way through
            real(Path(path) / "d0", *a, **kw)
            raise KeyboardInterrupt
        return real(path, *a, **kw)
    monkeypatch.setattr(bundle.shutil, "rmtree", interrupted)
    with pytest.raises(KeyboardInterrupt):
        bundle.remove_tree(tree)
    assert not tree.exists() and len(calls) == 2


def test_warnings_to_an_unwritable_stderr_do_not_stop_the_command(tmp_path):
    """A warning written to a full stderr was an internal error (status 70) and lower wrote
    nothing (the verification of the stderr fix: only the error paths had been covered)."""
    out = tmp_path / "o"
    with open("/dev/full", "w") as full:
        proc = cli("lower", "-q", FIX / "ar2.neff", "-o", out, "--no-verify-hash", stderr=full)
        assert proc.returncode == 0
        verify_complete(out)
        for args in (("inspect", FIX / "ar2.neff", "--no-verify-hash"),
                     ("explain", FIX / "ar2.neff", "--algo", "allgather:ring")):
            assert cli(*args, stderr=full).returncode == 0, args


def test_a_warning_lost_to_a_full_stderr_does_not_stop_lower_where_stderr_is_buffered(
        tmp_path):
    """Without PYTHONUNBUFFERED (an ordinary shell; this machine's sets it) Python keeps a
    BufferedWriter under stderr, and a warning that cannot be written there stayed in it:
    the flush multiprocessing makes before it forks a worker raised it again, and `lower -j
    2` stopped with `OUT: cannot write the output: No space left on device`, status 2,
    nothing written. The warning is lost and the output complete (docs/CLI.md "Errors")."""
    out = tmp_path / "o"
    plain = {k: v for k, v in env().items() if k != "PYTHONUNBUFFERED"}
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "nrtrewrite", "lower", "-q",
                               str(FIX / "ar2.neff"), "-o", str(out), "--no-verify-hash",
                               "-j", "2"], stdout=subprocess.PIPE, stderr=full, cwd=ROOT,
                              env=plain, timeout=120)
    assert proc.returncode == 0
    verify_complete(out)


def test_a_path_the_locale_cannot_encode_is_one_line(monkeypatch):
    """Under LC_ALL=ja_JP.EUC-JP Python decodes a UTF-8 argument into characters its euc_jp
    codec cannot encode back, and os.open of the argument itself raised UnicodeEncodeError:
    an internal error in every command."""
    from nrtrewrite.cli import _unencodable_path_line
    enc = sys.getfilesystemencoding()
    bad = UnicodeEncodeError(enc, "\udce6\x9d.neff", 0, 1, "illegal multibyte sequence")
    monkeypatch.setattr("nrtrewrite.cli.inspect.read_model",
                        lambda *a, **kw: (_ for _ in ()).throw(bad))
    res = invoke("inspect", "\udce6\x9d.neff")
    assert one_line(res, 2) == (
        "nrtrewrite: error: \\udce6\\x9d.neff: this path cannot be encoded in the locale's "
        f"encoding ({enc}: illegal multibyte sequence); run under a UTF-8 locale "
        "(LC_ALL=C.UTF-8) or rename it")
    other = UnicodeEncodeError("latin-1", "\u6743", 0, 1, "ordinal not in range")
    if other.encoding != enc:  # another codec's: a bug of ours, not the locale's
        assert _unencodable_path_line(other, ["\u6743"]) is None


def test_only_an_arguments_text_is_blamed_on_the_locale(monkeypatch):
    """A UnicodeEncodeError of the file-system codec whose text is no argument of the
    command (a spec's "\\ud800" header name) was reported as `\\ud800: this path cannot be
    encoded in the locale's encoding ...`; it is not a path's.  Text holding what an argument
    holds that cannot be encoded still is: the argument, a path beneath one, a hidden sibling
    made from one (a temporary file next to an output), the argument made absolute."""
    from nrtrewrite.cli import _unencodable_path_line
    enc = sys.getfilesystemencoding()

    def err(text: str, bad: str) -> UnicodeEncodeError:
        return UnicodeEncodeError(enc, text, text.index(bad), text.index(bad) + 1, "x")
    args = ["assemble", "d/\udcff.yaml", "-o", "o\udce6/m.neff"]
    for text, bad in (("d/\udcff.yaml", "\udcff"), ("o\udce6/m.neff", "\udce6"),
                      ("o\udce6/.m.neff.ab12cd34.tmp", "\udce6"),
                      ("d/\udcff.yaml/x", "\udcff"), ("/w/o\udce6/m.neff", "\udce6")):
        assert _unencodable_path_line(err(text, bad), args).startswith(
            f"nrtrewrite: error: {text.encode('ascii', 'backslashreplace').decode()}: this "
            "path cannot be encoded"), text
    for text, bad in (("a\ud800", "\ud800"), ("d/x\udcfe", "\udcfe"),
                      ("d/.\ud800", "\ud800")):
        assert _unencodable_path_line(err(text, bad), args) is None, text
    spec_error = UnicodeEncodeError(enc, "\ud800", 0, 1, "surrogates not allowed")
    monkeypatch.setattr("nrtrewrite.cli.inspect.read_model",
                        lambda *a, **kw: (_ for _ in ()).throw(spec_error))
    res = invoke("inspect", FIX / "ar2.neff")
    assert res.exit_code == 70 and "internal error: UnicodeEncodeError" in res.output


def test_assemble_over_a_file_keeps_its_mode(tmp_path):
    """`assemble -o` over an existing file gave it the umask's mode (0640 became 0644); a
    new file gets 0666 less the umask, as `open` gives it."""
    from nrtrewrite.neff.writer import write_bytes_atomic
    kept = tmp_path / "kept.neff"
    kept.write_bytes(b"old")
    os.chmod(kept, 0o640)
    write_bytes_atomic(kept, b"new")
    assert kept.read_bytes() == b"new" and (kept.stat().st_mode & 0o777) == 0o640
    fresh = tmp_path / "fresh.neff"
    umask = os.umask(0o027)
    try:
        write_bytes_atomic(fresh, b"x")
    finally:
        os.umask(umask)
    assert (fresh.stat().st_mode & 0o777) == 0o640
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_failed_write_names_its_reason_and_keeps_the_previous_file(tmp_path, monkeypatch):
    """writer.write_bytes_atomic: any OS error is an OutputError naming the path and the
    OS's reason, and the path keeps its previous content; a temporary that cannot be removed
    then does not hide that error.  An empty path is refused before anything is made."""
    from nrtrewrite.errors import OutputError
    from nrtrewrite.neff import writer
    kept = tmp_path / "kept.neff"
    kept.write_bytes(b"old")
    with pytest.raises(OutputError, match="^cannot write: an empty path$"):
        writer.write_bytes_atomic("", b"new")

    def full(*a):
        raise OSError(28, "No space left on device")

    def busy(*a):
        raise OSError(16, "Device or resource busy")
    monkeypatch.setattr(writer.os, "replace", full)
    monkeypatch.setattr(writer.os, "unlink", busy)
    with pytest.raises(OutputError) as exc:
        writer.write_bytes_atomic(kept, b"new")
    assert str(exc.value) == f"{kept}: cannot write: No space left on device"
    assert kept.read_bytes() == b"old"


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_outputs_and_json_documents_do_not_depend_on_the_string_hash_seed(tmp_path):
    """The developers' guide: the same input and options give byte-identical output.  Python
    salts the hash of every str (and of a plain Enum member, hashed by its name) per process, so
    anything that iterates a set or orders by hash would change from run to run; under two
    PYTHONHASHSEED values `lower` writes the same tree and `explain --json` and
    `schedule --json` print the same documents (mix8: ring, mesh and kangaring triggers, every
    algorithm's `policy` block)."""
    runs = []
    for seed in (0, 4242):
        out = tmp_path / f"s{seed}" / "out"
        out.parent.mkdir()
        low = cli("lower", "-q", FIX / "mix8.neff", "-o", out, PYTHONHASHSEED=seed)
        assert low.returncode == 0, low.stderr
        exp = cli("explain", FIX / "mix8.neff", "--json", PYTHONHASHSEED=seed)
        sch = cli("schedule", FIX / "mix8.neff", "--rank", 3, "--json", PYTHONHASHSEED=seed)
        assert exp.returncode == 0 and sch.returncode == 0, (exp.stderr, sch.stderr)
        runs.append((_tree(out), exp.stdout, sch.stdout))
    assert runs[0][0] and json.loads(runs[0][1]) and json.loads(runs[0][2])
    assert runs[1] == runs[0]
