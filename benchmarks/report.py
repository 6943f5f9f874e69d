"""The "Latest run" section of docs/PERFORMANCE.md, rendered from a `make bench` result.

    python benchmarks/report.py [benchmarks/out/last-run.json] [--commit REV] [--note TEXT]

`benchmarks/run.py` writes ``last-run.json`` and, through :func:`render`, ``last-run.md``
beside it; the doc's section is this script's output for the run (with the commit it
measured and a note on the conditions), pasted, so its figures are the run's, not
transcribed by hand.  Every figure issue 8 asks for is in it: records/s and artifact bytes/s
of one rank (the whole command, and the lowering alone) and of all ranks (of `all64` with
the files written, of `large64` into a sink), the ratios to the copy bound and to the
construct path (compiled and not), peak RSS (of every process), the time per stage, the
scaling exponents, and the targets with their verdicts.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from decimal import ROUND_HALF_EVEN, Context, Decimal, localcontext
from pathlib import Path

#: Stages of ``lower --rank R`` in the order the lowering runs them.  *hash* and *write* are
#: the writer thread's, overlapped with compose and emit; *fsync* is the wait at the end.
STAGES = ("parse", "select", "plan", "compose", "compose_wait", "compose_here", "emit",
          "serialize", "hash", "write", "fsync")


#: The scaling exponent's target, 1 +/- 0.15, as its two ends (``abs(e - 1) <= 0.15`` would
#: turn 0.85 itself down: 1 - 0.85 is 0.15000000000000002 in floating point; run.py judges
#: with these).
LINEAR = (0.85, 1.15)


#: The other targets' edges (run.py judges with these): the whole command at >= 10 % of the
#: copy bound, >= x100 the compiled construct path; "every core busy" is :func:`busy_needed`.
COPY_BOUND_SHARE = 0.10
CONSTRUCT_TIMES = 100


def _decimal(x: float, scale: int = 1) -> Decimal:
    """``x`` x ``scale`` exactly: the binary value's every digit, no rounding."""
    with localcontext(Context(prec=2000)):
        return Decimal(x) * scale


def _digits_shown(exact: Decimal, d: int) -> str:
    """``exact`` rounded to ``d`` decimals, half to even (as f-strings round a float)."""
    with localcontext(Context(prec=2000)):
        return f"{exact.quantize(Decimal(1).scaleb(-d), rounding=ROUND_HALF_EVEN):f}"


def _all_digits(exact: Decimal) -> int:
    """The decimals it takes to show ``exact`` whole (a float's are finite)."""
    return max(0, -exact.as_tuple().exponent)


def agreeing_text(x: float, digits: int, agrees, scale: int = 1) -> str:
    """``x`` x ``scale`` as shown beside a verdict: ``digits`` decimals, or as many more as
    it takes for ``agrees(shown)``, the verdict worked out on the decimal shown (a
    :class:`~decimal.Decimal`, as a reader reads it), to be the verdict on ``x`` (a figure
    rounded onto its target's edge read as a tie beside "does not hold").  The figure is
    scaled and rounded exactly, from ``x``'s binary value: until 2026-12-07 11:45 ``100 *
    x`` was rounded in floating point first, so 0.09999999999999999 (judged below 0.10)
    read 10.0 %, and where no decimals agreed ``repr`` was returned unchecked.  At the
    value's every digit the shown decimal is ``x`` itself, which agrees wherever the
    verdict is ``x`` against the edge as it reads (10, 100, 0.85); a value that does not
    is refused rather than shown disagreeing."""
    if not math.isfinite(x):
        return repr(float(x))
    exact = _decimal(x, scale)
    for d in range(digits, max(digits, _all_digits(exact)) + 1):
        text = _digits_shown(exact, d)
        if agrees(Decimal(text)):
            return text
    raise ValueError(f"{x!r}: no digits show it on the side of its target it is judged on")


def exponent_text(e: float) -> str:
    """A scaling exponent as shown beside its verdict: 3 decimals, or as many more as it
    takes for the shown value to fall on the same side of :data:`LINEAR`'s ends as ``e``
    (until 2026-12-07 always 3: 0.8495 showed as 0.850 beside "does not hold")."""
    holds = LINEAR[0] <= e <= LINEAR[1]
    lo, hi = (Decimal(str(end)) for end in LINEAR)
    return agreeing_text(e, 3, lambda s: (lo <= s <= hi) == holds)


def copy_share_text(ratio: float) -> str:
    """A ratio to the copy bound in %, judged against :data:`COPY_BOUND_SHARE`: 1 decimal,
    or more at the edge (until 2026-12-07 always 1: 0.0999 showed as 10.0 % beside "does
    not hold"), worked out on the ratio x 100 exactly (0.09999999999999999 reads
    9.9999999999999992 %, not 10.0)."""
    holds = ratio >= COPY_BOUND_SHARE
    edge = 100 * Decimal(str(COPY_BOUND_SHARE))
    return agreeing_text(ratio, 1, lambda s: (s >= edge) == holds, scale=100)


def construct_text(ratio: float) -> str:
    """The ratio to the construct path, judged against :data:`CONSTRUCT_TIMES`: no
    decimals, or more at the edge (x99.9 showed as x100 beside "does not hold")."""
    holds = ratio >= CONSTRUCT_TIMES
    return agreeing_text(ratio, 0, lambda s: (s >= CONSTRUCT_TIMES) == holds)


def at_most_digits(x: float, limit: float, digits: int = 0) -> int:
    """The decimals, ``digits`` or more, it takes for ``x`` and ``limit`` shown with them to
    compare (``x <= limit``) as the values do, both rounded exactly from their binary
    values (two floats differ at their every digit); ``digits`` where either is not finite
    (a hand-made NaN reads "nan" as before)."""
    if not (math.isfinite(x) and math.isfinite(limit)):
        return digits
    holds = x <= limit
    a, b = _decimal(x), _decimal(limit)
    for d in range(digits, max(digits, _all_digits(a), _all_digits(b)) + 1):
        if (Decimal(_digits_shown(a, d)) <= Decimal(_digits_shown(b, d))) == holds:
            return d
    raise ValueError(f"{x!r} <= {limit!r}: no digits show the pair as it compares")


def at_most_texts(x: float, limit: float) -> tuple[str, str]:
    """``x`` and ``limit`` (MB) as shown in "X MB <= LIMIT MB", judged ``x <= limit``: no
    decimals, or as many more, the same for both, as it takes for the shown pair to compare
    as the values do (:func:`at_most_digits`; until 2026-12-07 none: 1300.5 MB showed
    "1300 MB <= 1300 MB" beside "does not hold")."""
    if not (math.isfinite(x) and math.isfinite(limit)):
        return repr(float(x)), repr(float(limit))
    d = at_most_digits(x, limit)
    return _digits_shown(_decimal(x), d), _digits_shown(_decimal(limit), d)


def busy_edge(cores: int) -> Decimal:
    """The cores "every core busy" needs, CPU over wall: 0.8 x ``cores`` as the decimal reads
    (``8 * cores / 10``, exact: ``0.8 * 3`` is 2.4000000000000004, which turned 2.40 cores
    of 3 down until 2026-12-07)."""
    return Decimal(8 * cores) / 10


def busy_needed(cores: int) -> float:
    """:func:`busy_edge` as a float, which a run's cores busy is judged against (the float
    nearest the decimal: ``8 * cores / 10``)."""
    return float(busy_edge(cores))


def busy_text(busy: float, cores: int) -> str:
    """``B of N cores (at least T)``, "every core busy"'s figure and the threshold it is
    judged against (:func:`busy_needed`): 2 decimals, or more at the edge (until 2026-12-07
    the threshold was not shown, and 1.599 showed as 1.60 of 2 cores beside "does not
    hold")."""
    need = busy_needed(cores)
    return f"{busy_figure(busy, cores)} of {cores} cores (at least {need:.2f})"


def busy_figure(busy: float, cores: int) -> str:
    """The cores busy "every core busy" judges, with the digits that agree with its verdict
    (2 decimals, or more at the edge; the threshold reads as ``8 x cores / 10``, a decimal
    of one digit)."""
    need = busy_edge(cores)
    holds = busy >= float(need)  # (busy_needed)
    return agreeing_text(busy, 2, lambda s: (s >= need) == holds)


#: "every core busy" with the rule it is judged by (in the target's name since 2026-12-07;
#: an older result's name gets it when rendered: the rule was the same then).
BUSY_RULE = "every core busy (CPU over wall >= 0.8 x the cores)"


def target_name(name: str) -> str:
    """A target's name as rendered: an older result's "every core busy" with its rule."""
    if "every core busy" in name and BUSY_RULE not in name:
        return name.replace("every core busy", BUSY_RULE, 1)
    return name


def _mb(x: float) -> str:
    return f"{x / 1e6:,.0f} MB"


def _busy(runs: list) -> str:
    """What other processes kept busy during the runs, when more than 5 % of the cores."""
    worst = max((o for o in runs if o is not None), default=None)
    return "" if worst is None or worst <= 0.05 else f" (others up to {100 * worst:.0f} % busy)"


def ranges(xs: list[int]) -> str:
    """``0-3, 8`` for [0, 1, 2, 3, 8] (sorted ints)."""
    out, i = [], 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(f"{xs[i]}" if i == j else f"{xs[i]}-{xs[j]}")
        i = j + 1
    return ", ".join(out)


def _rank_table(large: list[dict], cli: list[dict] | None, old: bool = False) -> list[str]:
    """``cli``: the whole command's runs (None in a result from before 2026-12-02, whose
    rows are then left out); ``old``: a result judged before 2026-12-07 11:17
    (:func:`judged_digits_agree`), whose judged figures (bold, and the peak RSS against its
    target) are shown as its targets hold them."""
    cols = [f"`{r['model'].removesuffix('.neff')}` `--rank {r['rank']}`" for r in large]
    rows = [
        ("records, artifact bytes", [f"{r['records'] / 1e6:.1f} M, {_mb(r['bytes'])}"
                                     for r in large]),
    ]
    if cli:
        rows += _cli_rows(cli, old)
    rows += [
        ("the lowering alone (compose, emit, serialize; files written), median of the runs",
         [f"{r['lower_s']:.2f} s (" + ", ".join(f"{x:.2f}" for x in r.get(
             "lower_s_runs", [r["lower_s"]])) + ")" + _busy(r.get("others_busy_runs", []))
          for r in large]),
        ("the lowering alone: records/s, artifact bytes/s", [
            f"{r['records_per_s'] / 1e6:.1f} M/s, {r['bytes_per_s'] / 1e6:,.0f} MB/s"
            for r in large]),
        ("with the fsync", [f"{r['records_per_s_with_fsync'] / 1e6:.1f} M/s, "
                            f"{r['bytes_per_s_with_fsync'] / 1e6:,.0f} MB/s" for r in large]),
        ("the lowering alone against the copy bound, warm (fresh pages)",
         [f"{r['copy_warm_bytes_per_s'] / 1e9:.1f} GB/s: {100 * r['ratio_to_copy_bound']:.1f}"
          f" % ({r['copy_fresh_bytes_per_s'] / 1e9:.1f} GB/s: "
          f"{100 * r['ratio_to_fresh_copy']:.1f} %)" for r in large]),
        ("SHA-256 alone (every byte is hashed for the rank manifest)",
         [f"{r['sha256_bytes_per_s'] / 1e9:.2f} GB/s: the lowering runs at "
          f"{100 * r['ratio_to_sha256']:.0f} % of it" for r in large]),
        ("construct path per record, compiled structs (uncompiled), against the lowering alone",
         [f"{r['construct_compiled_s_per_record'] * 1e6:.2f} us "
          f"({r['construct_s_per_record'] * 1e6:.1f} us) vs {r['ours_s_per_record'] * 1e9:.0f} "
          f"ns: **x{_construct(r['ratio_to_construct_compiled'], old)}** "
          f"(x{r['ratio_to_construct']:.0f})"
          for r in large]),
        ("CPU in the lowering", [f"{r['lower_cpu_s']:.2f} s: {r['lower_cores_busy']:.2f} cores"
                                 for r in large]),
        ("stages (s)", [", ".join(f"{k} {r['stages'][k]:.2f}" for k in STAGES
                                  if k in r["stages"]) for r in large]),
        _rss_row(large, cli, old),
        ("channels in use (SPAD entries by algorithm: channels x entries)",
         [f"{ranges(r['channels']['used'])} of {r['channels']['entries']} entries; "
          + "; ".join(f"{a} " + ", ".join(f"{n} ch x{v}" for n, v in c_.items())
                      for a, c_ in r["channels"]["per_algorithm"].items())
          for r in large]),
    ]
    out = ["| `lower --rank R` | " + " | ".join(cols) + " |",
           "|---|" + "---|" * len(cols)]
    out += [f"| {name} | " + " | ".join(vals) + " |" for name, vals in rows]
    return out


def _peak_digits(peaks: list[float], limit: float, old: bool) -> int:
    """The decimals of judged peaks shown beside their target: none, or as many as it takes
    for each to compare with the target shown as it does (:func:`at_most_digits`; until
    2026-12-07 11:45 none: 1300.5 MB read "1300 MB ... (1,300 MB)"); none in a result
    judged before then, as its targets hold them."""
    return 0 if old else max(at_most_digits(p, limit) for p in peaks)


def _rss_row(large: list[dict], cli: list[dict] | None, old: bool = False
             ) -> tuple[str, list[str]]:
    """Peak RSS: since 2026-12-07 summed over each run's processes (sampled; judged), with
    the process's and its child's own peaks; in an older result (no ``peak_rss_sum_mb``)
    the process's plus its largest child's, as it was judged then.  The judged peaks and
    the target take :func:`_peak_digits`."""
    key = "peak_rss_sum_mb" if "peak_rss_sum_mb" in large[0] else "peak_rss_mb"
    cells = []
    for r, c in zip(large, cli or [None] * len(large)):
        d = _peak_digits([r[key]] + ([c[key]] if c else []), r["rss_target_mb"], old)
        if key == "peak_rss_mb":
            cells.append(
                f"lowering {r['peak_rss_mb']:.{d}f} MB = {r['peak_rss_self_mb']:.0f} + compose "
                f"process {r['peak_rss_compose_mb']:.0f}" + (
                    f"; whole command {c['peak_rss_mb']:.{d}f} MB = "
                    f"{c['peak_rss_self_mb']:.0f} + largest child "
                    f"{c['peak_rss_children_mb']:.0f}" if c else "")
                + f" ({r['rss_target_mb']:,.{d}f} MB)")
        else:
            cells.append(
                f"lowering {r['peak_rss_sum_mb']:.{d}f} MB (PSS {r['peak_pss_sum_mb']:.0f}; "
                f"{r['peak_rss_self_mb']:.0f} + compose process {r['peak_rss_compose_mb']:.0f})"
                + (f"; whole command {c['peak_rss_sum_mb']:.{d}f} MB (PSS "
                   f"{c['peak_pss_sum_mb']:.0f}; {c['peak_rss_self_mb']:.0f} + largest child "
                   f"{c['peak_rss_children_mb']:.0f})" if c else "")
                + f" ({r['rss_target_mb']:,.{d}f} MB)")
    if key == "peak_rss_mb":
        return ("peak RSS, the largest of the runs (target: 2 x artifacts + 300 MB)", cells)
    return ("peak RSS summed over the processes, the largest of the runs (PSS; the process "
            "and its largest child alone) (target: 2 x artifacts + 300 MB)", cells)


def copy_warning(r: dict) -> str | None:
    """What the copy bound's sanity check of a model found (``copy_check``, run.py's
    :func:`run.copy_bound`; None in a result from before 2026-12-07 or when every run's warm
    copy was at least its copy into fresh pages)."""
    k = r.get("copy_check")
    if not k or not (k["warm_below_fresh"] or k["best_warm_below_best_fresh"]):
        return None
    name = r["model"].removesuffix(".neff")
    text = (f"`{name}`: in {k['warm_below_fresh']} of {k['runs']} runs the warm copy measured "
            "below the copy into fresh pages (a disturbed measurement: the machine was busy); "
            f"the bound is the best warm copy of the runs, "
            f"{r['copy_warm_bytes_per_s'] / 1e9:.1f} GB/s")
    if k["best_warm_below_best_fresh"]:
        text += (f", itself below the best fresh copy, {r['copy_fresh_bytes_per_s'] / 1e9:.1f}"
                 " GB/s: the ratios to the copy bound flatter the lowering")
    return text


def _construct(ratio: float, old: bool) -> str:
    """The judged construct ratio in the table: with its verdict's digits, or in a result
    judged before 2026-12-07 11:17 (:func:`judged_digits_agree`) with none, as its targets
    hold it."""
    return f"{ratio:.0f}" if old else construct_text(ratio)


def _copy_share(ratio: float, old: bool) -> str:
    """The judged ratio to the copy bound in the table, in % (as :func:`_construct`)."""
    return f"{100 * ratio:.1f}" if old else copy_share_text(ratio)


def _cli_rows(cli: list[dict], old: bool = False) -> list[tuple[str, list[str]]]:
    return [
        ("**the whole command** (read, plan, lower, every file and manifest written and "
         "fsynced), median of the runs",
         [f"{c['seconds']:.2f} s (" + ", ".join(f"{x:.2f}" for x in c["seconds_runs"]) + ")"
          + _busy(c.get("others_busy_runs", [])) + f"; imports {c['import_s']:.2f} s before it"
          for c in cli]),
        ("the whole command: records/s, artifact bytes/s, CPU",
         [f"{c['records_per_s'] / 1e6:.1f} M/s, {c['bytes_per_s'] / 1e6:,.0f} MB/s; "
          f"{c['cpu_s']:.2f} s: {c['cores_busy']:.2f} cores" for c in cli]),
        ("the whole command against the copy bound: numpy copy, same size, warm (fresh pages);"
         + (" the best of the model's runs" if "copy_warm_own_bytes_per_s" in cli[0] else
            " the median run's own (a result from before 2026-12-07 09:11)"),
         [f"{c['copy_warm_bytes_per_s'] / 1e9:.1f} GB/s: "
          f"**{_copy_share(c['ratio_to_copy_bound'], old)} %** "
          f"({c['copy_fresh_bytes_per_s'] / 1e9:.1f} GB/s: "
          f"{100 * c['ratio_to_fresh_copy']:.1f} %)" for c in cli]),
    ]


def _all_table(a: dict, cores: int, old: bool = False) -> list[str]:
    """The pool's cores busy and each row's peak RSS beside its target with the digits
    their verdicts take (:func:`busy_figure`, :func:`_peak_digits`; until 2026-12-07 11:45
    2 and none: 1.599 read "1.60", 313.04 MB "313 MB ... (313 MB)"), or as judged in a
    result judged before 2026-12-07 11:17."""
    pool = a["pool"]
    out = [f"| all ranks of `{pool['model'].removesuffix('.neff')}` ({pool['records'] / 1e6:.1f}"
           f" M records, {_mb(pool['bytes'])}, written and fsynced) | wall | records/s | "
           "bytes/s | cores busy | peak RSS of all its processes, PSS (target) |",
           "|---|---|---|---|---|---|"]
    for r in (a["serial"], pool):
        busy = (busy_figure(r["cores_busy"], cores) if r is pool and not old
                else f"{r['cores_busy']:.2f}")
        d = _peak_digits([r["peak_rss_sum_mb"]], r["rss_target_mb"], old)
        out.append(f"| `-j {r['jobs']}` | {r['seconds']:.2f} s{_busy([r.get('others_busy_during')])}"
                   f" | {r['records_per_s'] / 1e6:.1f} M | {r['bytes_per_s'] / 1e6:,.0f} MB/s | "
                   f"{busy} | {r['peak_rss_sum_mb']:.{d}f} MB, "
                   f"{r['peak_pss_sum_mb']:.0f} MB ({r['rss_target_mb']:,.{d}f} MB) |")
    out.append("")
    out.append(f"Speedup x{a['speedup']:.2f}; the two output trees byte-identical: "
               f"**{'yes' if a['identical'] else 'NO'}**.")
    return out


def _sink_table(k: dict, cores: int, old: bool = False) -> list[str]:
    """As :func:`_all_table`, of the sink's run."""
    d = _peak_digits([k["peak_rss_sum_mb"]], k["rss_target_mb"], old)
    busy = f"{k['cores_busy']:.2f}" if old else busy_figure(k["cores_busy"], cores)
    return [f"| all {k['ranks']} ranks of `{k['model'].removesuffix('.neff')}` "
            f"({k['records'] / 1e6:.1f} M records, {_mb(k['bytes'])}), lowered with the pool "
            "into a sink (hashed, no files) | wall | records/s | bytes/s | cores busy | peak RSS "
            "of all its processes, PSS (target) |",
            "|---|---|---|---|---|---|",
            f"| `-j {k['jobs']}` | {k['seconds']:.2f} s{_busy([k.get('others_busy_during')])} | "
            f"{k['records_per_s'] / 1e6:.1f} M | {k['bytes_per_s'] / 1e6:,.0f} MB/s | "
            f"{busy} | {k['peak_rss_sum_mb']:.{d}f} MB, {k['peak_pss_sum_mb']:.0f} "
            f"MB ({k['rss_target_mb']:,.{d}f} MB) |",
            "",
            "Ranks " + ", ".join(map(str, k["serial_checked"])) + " lowered again serially: "
            "their manifests (every file's SHA-256) "
            f"**{'equal' if k['serial_identical'] else 'DIFFER'}** to the pool's."]


def _scaling_table(scaling: dict, old: bool = False) -> list[str]:
    """The sweeps; ``old``: a result without ``provenance`` (run.py before 2026-12-07
    09:16), whose targets hold the exponents as 3 decimals, shown so here too (review 54o;
    the exponents' agreeing digits came at 09:11: a result of those five minutes shows 3
    here)."""
    out = ["| sweep | points: records, ms (of it the writer thread's hash; CPU ms of both "
           "threads) | time ~ records^e | affine fit | CPU ~ records^e |",
           "|---|---|---|---|---|"]
    for policy, sc in scaling.items():
        for key in ("message_size", "ranks"):
            k = sc[key]
            algos = sorted({a for r in k["runs"] for a in r["algorithms"]})
            name = (f"{'size' if key == 'message_size' else 'ranks'} ({k['message']}), "
                    f"{'`--algo ring`' if policy == 'ring' else 'default policy'}: "
                    + ", ".join(algos))
            pts = "; ".join(f"x{r['x']}: {r['records'] / 1e3:,.0f} k, {r['lower_s'] * 1e3:.1f} "
                            f"({r['stages']['hash'] * 1e3:.1f}; {r['cpu_s'] * 1e3:.1f})"
                            for r in k["runs"])
            fit = k["affine_fit"]
            x = k["exponent_time_vs_records"]
            e = f"{x:.3f}" if old else exponent_text(x)
            out.append(f"| {name} | {pts} | **{e}** | "
                       f"{fit['fixed_ms']:.1f} ms + {fit['ns_per_record']:.1f} ns/record | "
                       f"{k['exponent_cpu_vs_records']:.3f} |")
    return out


def named_commit(res: dict, commit: str, checkout: Path | None = None
                 ) -> tuple[str | None, str | None]:
    """``--commit COMMIT`` against the commit the run recorded (``provenance``, since
    2026-12-07): ``(the commit to name, None)`` where it is that commit, named by its full
    hash (until 2026-12-07 as typed: a prefix, or a name such as ``HEAD`` that later meant
    another), or ``(None, why)`` where it is not, or where the run recorded none (outside a
    git checkout, or in one git refused: until 2026-12-07 any COMMIT was taken).  COMMIT is
    taken as a prefix of the recorded hash (4 hex digits at least) or as a name ``git
    rev-parse`` resolves to it in ``checkout``.  A result from before, which records no
    provenance, takes COMMIT as given."""
    if "provenance" not in res:
        return commit, None
    recorded = (res["provenance"] or {}).get("commit")
    if not recorded:
        return None, (f"--commit {commit}: the run recorded no commit (it ran outside a git "
                      "checkout, or in one git refused): leave --commit out")
    text = commit.strip().lower()
    hexits = bool(text) and all(ch in "0123456789abcdef" for ch in text)
    if hexits and recorded.startswith(text):
        if len(text) >= 4:
            return recorded, None
        return None, (f"--commit {commit}: too short to name a commit (4 hex digits at "
                      f"least, as git takes), though the run's {recorded[:12]} begins "
                      "with it: name it by 4 or more, or leave --commit out")
    if checkout is not None:
        import subprocess
        try:
            got = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--verify", "-q",
                                  commit + "^{commit}"], capture_output=True, text=True,
                                 timeout=60)
            if got.returncode == 0 and got.stdout.strip() == recorded:
                return recorded, None
        except (OSError, subprocess.SubprocessError):
            pass
    return None, (f"--commit {commit}: the run measured {recorded[:12]} (its result records "
                  "it): leave --commit out, or name that commit")


def _where(res: dict, commit: str | None) -> str:
    """`` in a checkout of COMMIT`` (``--commit``'s as :func:`named_commit` names it, else
    the recorded one, short), with `` with uncommitted changes`` when the run recorded a
    dirty tree, or ``, whether with uncommitted changes unknown`` where it recorded a commit
    but not whether its tree was (git status failed; until 2026-12-07 11:45 that read as a
    clean tree)."""
    p = res.get("provenance") or {}
    commit = commit or (p.get("commit") or "")[:7]
    if not commit:
        return ""
    if p.get("commit") and p.get("dirty") is None:  # (git could not tell: run.py's warning)
        return f" in a checkout of {commit}, whether with uncommitted changes unknown"
    return f" in a checkout of {commit}" + (" with uncommitted changes" if p.get("dirty") else "")


def _versions(res: dict) -> str:
    p = res.get("provenance") or {}
    if not p.get("python"):
        return ""
    return f", Python {p['python']}, numpy {p['numpy']}, construct {p['construct']}"


def judged_digits_agree(res: dict) -> bool:
    """Whether ``res``'s targets were judged with the digits that agree with the verdicts
    (run.py since 2026-12-07 11:17, fa0d8c8): its "every core busy" targets name their
    rule (:data:`BUSY_RULE`), which run.py writes since then, and every run has one (the
    all-ranks pool).  A result judged before, with or without ``provenance`` (a run of
    09:16 - 11:17 records it: keying on it mixed "x100 ... does not hold" in the targets
    with "x99.6" in the table), has its table's judged figures shown as its targets hold
    them: to the digits of then."""
    return any(BUSY_RULE in t["target"] for t in res["targets"])


def render(res: dict, commit: str | None = None, note: str | None = None) -> str:
    """The markdown of one `make bench` result (``last-run.json``'s content)."""
    m = res["machine"]
    where = _where(res, commit)
    busy = ("" if m.get("others_busy") is None else
            f", other processes {100 * m['others_busy']:.0f} % busy")
    lines = [f"`{res['command']}`{where}, {res['date']}, {res['cores']} cores"
             f"{_versions(res)}. The machine "
             f"at the start: pure Python {m['python_loop_ns']:.0f} ns per loop iteration, "
             f"numpy {m['numpy_call_us']:.2f} us per small call, copy "
             f"{m['copy_warm_bytes_per_s'] / 1e9:.1f} GB/s and SHA-256 "
             f"{m['sha256_bytes_per_s'] / 1e9:.2f} GB/s for 64 MiB{busy} (the copy bound of "
             "each model below is measured at its artifacts' size). MB are 10^6 bytes."]
    if res.get("quick"):
        lines.append("")
        lines.append("**A `--quick` run: smaller models than issue 8 asks for.**")
    if note:
        lines += ["", note]
    lines += ["", "**Targets** (issue 8):", "", "| target | measured | verdict |", "|---|---|---|"]
    lines += [f"| {target_name(t['target'])} | {t['measured']} | "
              f"{'holds' if t['holds'] else '**does not hold**'} |" for t in res["targets"]]
    old = not judged_digits_agree(res)
    lines += ["", *_rank_table(res["large"], res.get("large_cli"), old)]
    warnings = [w for w in map(copy_warning, res["large"]) if w]
    if warnings:
        lines += [""] + [f"**Warning**: {w}." for w in warnings]
    for key in ("all_ranks", "all_ranks_large"):
        if key in res:
            lines += ["", *_all_table(res[key], res["cores"], old)]
    if "all_ranks_large_sink" in res:
        lines += ["", *_sink_table(res["all_ranks_large_sink"], res["cores"], old)]
    lines += ["", *_scaling_table(res["scaling"], old="provenance" not in res)]
    return "\n".join(lines) + "\n"


#: the ``--help`` description, the docstring's first paragraph as a string: ``python -OO``
#: strips docstrings, where argparse read it from (no description until 2026-12-06)
DESCRIPTION = ('The "Latest run" section of docs/PERFORMANCE.md, rendered from a `make bench` '
               'result.')


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=DESCRIPTION)
    ap.add_argument("result", nargs="?",
                    default=str(Path(__file__).resolve().parent / "out" / "last-run.json"))
    ap.add_argument("--commit", help="the commit the run measured, by a name git resolves "
                    "or a prefix of 4 hex digits or more (named in the first line by the full "
                    "hash the run recorded, or as typed for a result from before 2026-12-07, "
                    "which records none; by default the one the run recorded, short; refused "
                    "when it is another, or when the run recorded none)")
    ap.add_argument("--note", help="a paragraph to put under the first line")
    args = ap.parse_args(argv)
    try:
        res = json.loads(Path(args.result).read_text())
    except (OSError, ValueError) as exc:
        print(f"report: {args.result}: {exc}", file=sys.stderr)
        return 2
    if not (isinstance(res, dict) and "large_cli" in res):
        print(f"report: {args.result}: a result of a run.py from before 2026-12-02 15:40 "
              "(no whole-command runs, no compiled construct path): run `make bench` again",
              file=sys.stderr)
        return 2
    commit = args.commit
    if commit is not None:
        try:
            commit, why = named_commit(res, commit, Path(__file__).resolve().parent.parent)
        except (TypeError, AttributeError) as exc:  # (a hand-made provenance)
            why = f"its provenance is not what run.py writes ({exc})"
        if why:
            print(f"report: {args.result}: {why}", file=sys.stderr)
            return 2
    try:
        text = render(res, commit, args.note)
    except KeyError as exc:  # (a hand-made or cut-down result)
        print(f"report: {args.result}: no {exc} in it, which a run.py result has: run "
              "`make bench` again", file=sys.stderr)
        return 2
    except (TypeError, ValueError, IndexError, AttributeError, OverflowError) as exc:
        # (OverflowError: a hand-made int too large for a float, 10**400)
        print(f"report: {args.result}: a value is not what run.py writes ({exc}): run "
              "`make bench` again", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
