"""Profile one rank's lowering: where the time of ``lower --rank R`` goes (docs/PERFORMANCE.md
"Profiling").

    python benchmarks/profile_rank.py [MODEL] [--rank R] [--algo A] [--what lower|plan]
                                 [--tool pyinstrument|cprofile|lines] [--warm]

``MODEL`` is a NEFF file or the name of a benchmark model (``large64``, ``large128``,
``all64``, the sweeps' ``size_x1``... and ``ranks_8``...: built under benchmarks/out/ by
``make bench``, and here when missing, as ``make bench`` builds them); default ``large64``.

The lowering runs in this process as ``lower --rank R`` runs it, without writing files:
read, select and plan (``--what plan`` profiles these), then ``lower_rank`` with the records
hashed and discarded (``--what lower``, the default). ``--warm`` lowers the rank once
before the profiled run (first-use costs - imports, per-plan caches - then do not show).

Tools: ``pyinstrument`` (the default when it is installed: a statistical call tree, cheap
enough not to bend the picture; ``--html FILE`` writes its interactive report too),
``cprofile`` (the standard library's deterministic profiler: exact call counts, inflated
times for many small calls; the top ``--top`` functions by own and by cumulative time), and
``lines`` (line_profiler over ``--functions module:function,...``, default the emitter's
``emit_entries`` and its stages: time per source line). ``make profile`` installs the tool
it runs into the virtual environment first when it is missing (pyinstrument, the default;
line_profiler for ``TOOL=lines``; nothing for ``TOOL=cprofile``).
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import io
import pstats
import sys
import threading
import time
from pathlib import Path
from typing import NoReturn

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

#: ``--tool lines``'s default functions: the emitter and the stages it calls, in order.
EMITTER_STAGES = ",".join(
    f"nrtrewrite.emit.legs:{f}" for f in (
        "emit_entries", "_legs_of", "_data_records", "_sem_records", "_sb2sb_records",
        "_leg_records", "_tpinc_steps", "_fifo_records"))

#: Models ``make bench`` builds that this script builds too when they are missing, as its
#: full run builds them (benchmarks/run.py): ``(models' spec function, its arguments)``.
#: The sweeps: ``size_x{m}`` is 64 ranks of 64 MiB x m, ``ranks_{r}`` r ranks of 32 MiB x r
#: (until 2026-12-06 only the large models: ``make profile MODEL=size_x1`` needed ``make
#: bench`` first).
BUILDABLE = {"large64": ("large_spec", (64,), {}), "large128": ("large_spec", (128,), {}),
             "all64": ("large_spec", (64,), {"count": 100, "hi": 16 << 20}),
             **{f"size_x{m}": ("sweep_spec", (64, (64 << 20) * m), {}) for m in (1, 4, 16, 64)},
             **{f"ranks_{r}": ("sweep_spec", (r, (32 << 20) * r), {})
                for r in (8, 16, 32, 64, 128)}}


def _me() -> str:
    """The script that runs (leg_cost.py shares :func:`model_path`), for error lines."""
    return Path(sys.argv[0]).name or "profile_rank.py"


def fail(why: str) -> NoReturn:
    """A bad input's one line, ``SCRIPT: error: WHY``, and status 2."""
    print(f"{_me()}: error: {why}", file=sys.stderr)
    sys.exit(2)


def model_path(name: str) -> Path:
    """A NEFF path, or the benchmark model of that name (built if missing and buildable)."""
    p = Path(name)
    if p.suffix == ".neff" or p.exists():
        if not p.is_file():
            fail(f"{p}: no such file")
        return p
    import models
    from models import OUT, build

    path = OUT / f"{name}.neff"
    if path.is_file():
        return path
    if name not in BUILDABLE:
        fail(f"{path}: no such model (this script builds {', '.join(BUILDABLE)})")
    spec_of, args, kw = BUILDABLE[name]
    print(f"building {path} ...", file=sys.stderr)
    return build(name, getattr(models, spec_of)(*args, **kw))


class Writer:
    """The sink of the profiled lowering: discards the records, as before, and measures the
    writer thread it runs on (``RankBuilder``'s ``nrtrewrite-sink``, which hashes every
    array for the rank manifest, then hands it here): its name, its CPU time as of its last
    array (``time.thread_time`` read there), and the part of that CPU time spent in this
    sink (``time.thread_time`` around each of its calls on that thread; until 2026-12-07
    wall time, of the main thread's calls too, printed as a part of the CPU figure).
    pyinstrument and line_profiler see the main thread only: these figures are printed
    above their report (until 2026-12-07 the writer thread appeared in no profile)."""

    def __init__(self):
        self.thread: str | None = None
        self.cpu_s = self.sink_s = 0.0

    def sink(self, name: str, arr) -> None:
        current = threading.current_thread()
        if current is threading.main_thread():  # (a rank's first arrays, hashed inline)
            return
        t0 = time.thread_time()
        self.thread = current.name
        self.cpu_s = time.thread_time()
        self.sink_s += self.cpu_s - t0


def _profile_thread(threads: dict):
    """A ``threading.setprofile`` hook that profiles each thread started meanwhile with a
    cProfile of its own, kept in ``threads`` by the thread's name (cProfile, enabled in the
    main thread, profiles it alone)."""
    def hook(frame, event, arg):
        prof = threads[threading.current_thread().name] = cProfile.Profile()
        prof.enable()  # (replaces this hook in the thread)
    return hook


def check_rank(model, rank: int, path: Path) -> None:
    """Refuse (:func:`fail`) a rank outside ``model``'s world, as ``lower --rank`` refuses
    it (run.py's workers use this rule too: a rank outside the world lowers to nothing)."""
    from nrtrewrite.select import ranks_text

    if rank not in model.world:
        fail(f"rank {rank} is not in {path.name}'s world (ranks {ranks_text(model.world)})")


def _tool(name: str | None) -> str:
    if name:
        return name
    try:
        import pyinstrument  # noqa: F401
    except ImportError:
        return "cprofile"
    return "pyinstrument"


def _functions(spec: str) -> list:
    """The functions ``--functions`` names (``module:function,...``; a method as
    ``module:Class.method``); a name that is not one is refused (:func:`fail`)."""
    out = []
    for item in spec.split(","):
        mod, _, fn = item.partition(":")
        if not mod or not fn:
            fail(f"--functions {item!r}: not module:function")
        try:
            obj = importlib.import_module(mod)
        except ImportError as err:
            fail(f"--functions {item!r}: {err}")
        for part in fn.split("."):
            if not hasattr(obj, part):
                fail(f"--functions {item!r}: {mod} has no {fn!r}")
            obj = getattr(obj, part)
        if not callable(obj):
            fail(f"--functions {item!r}: not a function")
        out.append(obj)
    return out


def rank_arguments(description: str, default_model: str) -> argparse.ArgumentParser:
    """The parser of a script that works on one rank of a model: ``MODEL`` (a NEFF or a
    benchmark model's name, :func:`model_path`), ``--rank``, ``--algo``; described by
    ``description`` (the script's ``DESCRIPTION``: a docstring is None under ``python -OO``)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("model", nargs="?", default=default_model)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--algo", default=None, help="algorithm override, as lower --algo")
    return ap


#: the ``--help`` description, the docstring's first paragraph as a string: ``python -OO``
#: strips docstrings, where argparse read it from (no description until 2026-12-06)
DESCRIPTION = ("Profile one rank's lowering: where the time of ``lower --rank R`` goes "
               "(docs/PERFORMANCE.md \"Profiling\").")


def main(argv: list[str] | None = None) -> None:
    ap = rank_arguments(DESCRIPTION, "large64")
    ap.add_argument("--what", choices=("lower", "plan"), default="lower")
    ap.add_argument("--tool", choices=("pyinstrument", "cprofile", "lines"), default=None)
    ap.add_argument("--warm", action="store_true", help="lower the rank once first")
    ap.add_argument("--top", type=int, default=25, help="cprofile: functions shown")
    ap.add_argument("--html", type=Path, help="pyinstrument: also write its HTML report")
    ap.add_argument("--functions", default=EMITTER_STAGES,
                    help="lines: the functions to time line by line (module:function,...)")
    args = ap.parse_args(argv)
    if args.top < 1:  # (-3 printed nothing at all; review 54o)
        ap.error(f"argument --top: {args.top}: at least 1 function is shown")

    from nrtrewrite.errors import NrtRewriteError

    tool = _tool(args.tool)
    # named functions first: a wrong one is refused before the model is built or read
    functions = _functions(args.functions) if tool == "lines" else []
    path = model_path(args.model)
    try:
        report, stages = profile(args, path, tool, functions)
    except NrtRewriteError as err:  # the model or --algo: one line, as lower says it
        fail(err.at(file=str(path)).line())

    rank = "" if args.what == "plan" else f" rank {args.rank}"
    print(f"{path.name}{rank}, {args.what}, {tool}{' (warm)' if args.warm else ''}:")
    for k, v in stages.items():
        print(f"  {k}: {v:,}" if k == "records" else f"  {k}: {v:.3f} s")
    print(report)


def profile(args: argparse.Namespace, path: Path, tool: str, functions: list
            ) -> tuple[str, dict]:
    """The profiler's report of ``args.what`` on model ``path`` and the stage times of the
    profiled run."""
    from nrtrewrite.lower import LowerOptions, lower_rank, plan_lowering
    from nrtrewrite.neff.reader import read_model

    options = LowerOptions(algo=args.algo)

    def plan():
        t0 = time.perf_counter()
        m = read_model(path)
        t1 = time.perf_counter()
        if args.what != "plan":
            check_rank(m, args.rank, path)
        p = plan_lowering(m, options)
        stages["read"], stages["plan (select, prepare)"] = t1 - t0, time.perf_counter() - t1
        return p

    stages: dict[str, float] = {}
    if args.warm:
        lower_rank(plan(), args.rank, sink=lambda name, arr: None)
    the_plan = None if args.what == "plan" else plan()
    writer = Writer()

    def work():
        nonlocal the_plan
        if args.what == "plan":
            the_plan = plan()
            return
        t0 = time.perf_counter()
        out = lower_rank(the_plan, args.rank, sink=writer.sink)
        stages["lower_rank"] = time.perf_counter() - t0
        stages.update({f"  {k}": v for k, v in out.timings.items()})
        stages["records"] = sum(f["records"] for f in out.manifest["files"].values())
        if writer.thread is not None:  # (a rank of small arrays hashes them inline)
            # (its hashing is `hash` above, but for the first arrays, hashed inline)
            stages[f"writer thread {writer.thread}, CPU"] = writer.cpu_s
            stages["  of it in the sink (records discarded here), CPU"] = writer.sink_s

    if tool == "pyinstrument":
        from pyinstrument import Profiler

        prof = Profiler(interval=0.0005)
        prof.start()
        work()
        prof.stop()
        report = prof.output_text(unicode=True, color=False, show_all=False)
        if args.html:
            try:
                args.html.write_text(prof.output_html())
            except OSError as err:
                fail(f"--html {args.html}: {err.strerror or err}")
    elif tool == "cprofile":
        prof = cProfile.Profile()
        threads: dict[str, cProfile.Profile] = {}
        threading.setprofile(_profile_thread(threads))  # (threads started from now on)
        prof.enable()
        try:
            work()
        finally:
            prof.disable()
            threading.setprofile(None)
        buf = io.StringIO()
        st = pstats.Stats(prof, stream=buf)
        for key in ("tottime", "cumulative"):
            buf.write(f"\n--- by {key} ---\n")
            st.sort_stats(key).print_stats(args.top)
        for name, thread_prof in threads.items():  # the writer thread's own profile
            buf.write(f"\n--- thread {name}, by tottime ---\n")
            pstats.Stats(thread_prof, stream=buf).sort_stats("tottime").print_stats(args.top)
        report = buf.getvalue()
    else:
        try:
            from line_profiler import LineProfiler
        except ImportError:
            raise SystemExit(f"{_me()}: error: --tool lines needs line_profiler "
                             "(pip install line_profiler)") from None
        lp = LineProfiler(*functions)
        lp.enable_by_count()
        work()
        lp.disable_by_count()
        buf = io.StringIO()
        lp.print_stats(stream=buf, output_unit=1e-3, stripzeros=True)
        report = buf.getvalue()
    return report, stages


if __name__ == "__main__":
    main()
