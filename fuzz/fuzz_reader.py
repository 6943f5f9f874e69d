#!/usr/bin/env python3
"""Coverage-guided fuzz target for the NEFF-like reader, the trigger decoder and planning.

Run with ``make fuzz`` (``FUZZ_SECONDS``, default 60), or directly::

    python fuzz/fuzz_reader.py --seconds 60 [--corpus DIR] [--pure] [-LIBFUZZER_FLAG=V ...]

With atheris installed (``pip install atheris``) this is a libFuzzer run with
coverage feedback over every ``nrtrewrite`` module (arguments this script does not
know, such as ``-runs=1000``, go to libFuzzer); without it (or with
``--pure``) a pure-Python mutation loop runs instead (random byte flips, inserts,
deletes and splices of the same seeds, no coverage feedback), which refuses them.
``--seconds`` (default: the environment's ``FUZZ_SECONDS``, else 60) is a number
greater than 0.  Ctrl-C stops either run without a finding
(``KeyboardInterrupt: stopping.``).

The oracle (:func:`one_input`): whatever the bytes, reading them either succeeds
or raises an :class:`~nrtrewrite.errors.NrtRewriteError` whose message is one
line.  Any other exception is a crash; libFuzzer saves the input under
``fuzz/crashes/`` (the pure loop too).  Inputs that crashed once are committed
under ``fixtures/fuzz/`` and replayed by ``tests/test_fuzz.py``.

An input is one *mode* byte followed by a body, so that mutations reach past the
gzip and hash layers:

====  ==========================================================================
mode  body
====  ==========================================================================
0     a whole NEFF-like file (read with the hash check off)
1     an uncompressed tar; wrapped in gzip + a valid header, then read
2     seed selector byte + stream selector byte + the bytes of one engine stream,
      written over that stream of a fixture; read, then planned (and one rank
      lowered) when the model is small
3     seed selector byte + subgraph selector byte + a ``def.json`` text, written
      over that subgraph's ``def.json`` of a fixture; read, planned, lowered
====  ==========================================================================

The seed selector byte ``b`` of modes 2 and 3 picks ``SELECTOR_FIXTURES[b % 8]``, an
explicit list of the fixtures these modes write over (:func:`pick_fixture`), not the sorted
``fixtures/*.neff`` (until 2026-12-06), so that a fixture added under ``fixtures/`` leaves
every input picking the fixture it picked: the committed regressions (``fixtures/fuzz/``)
and a corpus kept from earlier runs (``fuzz/corpus/``) replay what they found.  Appending a
name to the list would retarget every selector of 8 or more: ``tests/test_fuzz.py`` pins
the list and the pick of each selector.  Seeds are built from ``fixtures/*.neff`` in modes
0 and 1 (every fixture, added ones too) and from the list in modes 2 and 3
(:func:`seed_inputs`).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import math
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
CRASH_DIR = ROOT / "fuzz" / "crashes"

#: Tight decompression limits for fuzzing (the defaults are GiBs).
FUZZ_LIMITS = dict(max_total_bytes=16 << 20, max_member_bytes=8 << 20, max_members=256)
#: Models are planned and lowered only below these sizes (a fuzzed num_elements may
#: legitimately ask for gigabytes of traffic; that is slow, not a bug).
PLAN_MAX_WORLD = 16
PLAN_MAX_TRIGGER_BYTES = 1 << 20
PLAN_MAX_TRIGGERS = 16
#: A topology is built up to the largest rank id (MAX_TOPOLOGY_RANKS = 2**20 takes ~4 s and
#: ~260 MB, legitimately): the fuzzers plan only models whose ranks are below this.
PLAN_MAX_RANK_ID = 4096

#: The fixtures modes 2 and 3 write over, in seed selector order (:func:`pick_fixture`): the
#: sorted fixtures/*.neff of 2026-12-06, kept as they are when a fixture is added there.
SELECTOR_FIXTURES = ("ar2", "c7c8", "groups", "int32_allgather", "mix8", "node64", "sbuf",
                     "two_node128")

_SEEDS: dict | None = None


def pick_fixture(selector: int) -> str:
    """The fixture a mode 2 or 3 input's seed selector byte names."""
    return SELECTOR_FIXTURES[selector % len(SELECTOR_FIXTURES)]


def _seed_models():
    """``{name: (header, members)}`` of :data:`SELECTOR_FIXTURES`, in its order (cached)."""
    global _SEEDS
    if _SEEDS is None:
        from nrtrewrite.neff.container import read_container
        _SEEDS = {}
        for name in SELECTOR_FIXTURES:
            path = FIXTURES / f"{name}.neff"
            cont = read_container(path.read_bytes(), path=str(path))
            _SEEDS[name] = (cont.header, dict(cont.members))
    return _SEEDS


def _streams(members: dict[str, bytes]) -> list[str]:
    return [name for name in members if name.endswith(".bin")]


def _defs(members: dict[str, bytes]) -> list[str]:
    return [name for name in members if name.endswith("/def.json")]


def build_file(mode: int, body: bytes) -> bytes | None:
    """The NEFF-like file bytes an input stands for, or None when it names nothing."""
    from nrtrewrite.neff.container import build_container, default_header, wrap_payload
    if mode == 0:
        return body
    if mode == 1:
        return wrap_payload(default_header(), gzip.compress(body, compresslevel=1, mtime=0))
    if len(body) < 2:
        return None
    header, members = _seed_models()[pick_fixture(body[0])]
    names = _streams(members) if mode == 2 else _defs(members)
    if not names:
        return None
    members = dict(members)
    members[names[body[1] % len(names)]] = bytes(body[2:])
    return build_container(header, members)


def _small_enough(model) -> bool:
    if len(model.world) > PLAN_MAX_WORLD or len(model.triggers) > PLAN_MAX_TRIGGERS:
        return False
    if model.world and max(model.world) > PLAN_MAX_RANK_ID:
        return False
    return all(max(t.in_bytes, t.out_bytes) <= PLAN_MAX_TRIGGER_BYTES for t in model.triggers)


def check_error(err: BaseException) -> None:
    """Our error family, one line: anything else is re-raised as a finding."""
    from nrtrewrite.errors import NrtRewriteError
    if not isinstance(err, NrtRewriteError):
        raise err
    line = str(err)
    if "\n" in line or "\r" in line or not line:
        raise AssertionError(f"error message is not one non-empty line: {line!r}") from err


def one_input(data: bytes) -> None:
    """The fuzz oracle: read (and for modes 2-3 plan and lower) one input."""
    from nrtrewrite.lower import LowerOptions, lower_rank, plan_lowering
    from nrtrewrite.limits import check_plan
    from nrtrewrite.neff.container import Limits
    from nrtrewrite.neff.reader import read_model_bytes
    if not data:
        return
    mode, body = data[0] % 4, data[1:]
    try:
        raw = build_file(mode, body)
    except Exception as err:  # building a container from fuzz bytes: our errors only
        check_error(err)
        return
    if raw is None:
        return
    try:
        model = read_model_bytes(raw, path="fuzz.neff", verify_hash=False,
                                 limits=Limits(**FUZZ_LIMITS))
        if mode >= 2 and _small_enough(model):
            plan = plan_lowering(model, LowerOptions())
            check_plan(plan)
            lower_rank(plan, plan.world[0])
    except Exception as err:
        check_error(err)


def seed_inputs() -> list[bytes]:
    """Seed inputs in every mode, from the fixtures."""
    from nrtrewrite.neff.container import gunzip_limited, HEADER_SIZE
    out = []
    for i, path in enumerate(sorted(FIXTURES.glob("*.neff"))):
        raw = path.read_bytes()
        out.append(b"\x00" + raw)
        out.append(b"\x01" + bytes(gunzip_limited(raw[HEADER_SIZE:], 64 << 20)))
    for i, (_header, members) in enumerate(_seed_models().values()):  # i: its selector
        for j, name in enumerate(_streams(members)):
            if members[name]:
                out.append(bytes([2, i, j]) + members[name])
        for j, name in enumerate(_defs(members)):
            out.append(bytes([3, i, j]) + members[name])
    return out


def write_seed_corpus(corpus: Path) -> None:
    corpus.mkdir(parents=True, exist_ok=True)
    for data in seed_inputs():
        (corpus / hashlib.sha1(data).hexdigest()).write_bytes(data)


# ---------------------------------------------------------------------------
# the pure-Python fallback (no coverage feedback)

def mutate(rng: random.Random, data: bytes, pool: list[bytes]) -> bytes:
    """A few random byte-level edits of ``data`` (mode byte kept)."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        op = rng.randrange(6)
        pos = rng.randrange(1, max(2, len(buf)))
        if op == 0 and len(buf) > 1:  # flip bits
            buf[min(pos, len(buf) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1 and len(buf) > 1:  # interesting byte
            buf[min(pos, len(buf) - 1)] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, 0xC7, 0xC8, 0xD9,
                                                      0xDA, 0x10))
        elif op == 2:  # insert
            buf[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        elif op == 3 and len(buf) > 2:  # delete
            del buf[pos:pos + rng.randint(1, 64)]
        elif op == 4 and len(buf) > 9:  # interesting 64-bit value
            v = rng.choice((0, 1, 2**31 - 1, 2**32 - 1, 2**32, 2**63, 2**64 - 1))
            p = min(pos, len(buf) - 8)
            buf[p:p + 8] = v.to_bytes(8, "little")
        else:  # splice from another input
            other = rng.choice(pool)
            a = rng.randrange(len(other))
            buf[pos:pos + rng.randint(0, 64)] = other[a:a + rng.randint(1, 256)]
    return bytes(buf)


def pure_loop(seconds: float | None, corpus: list[bytes], seed: int | None = None, *,
              max_runs: int | None = None, crash_dir: Path | None = None) -> int:
    """Mutate seeds for ``seconds`` (None: no time limit) or ``max_runs`` executions,
    whichever ends first; returns the number of executions.  Crashes are saved under
    ``crash_dir`` (fuzz/crashes/) and re-raised."""
    rng = random.Random(seed)
    end = None if seconds is None else time.monotonic() + seconds
    runs = 0
    while (end is None or time.monotonic() < end) and (max_runs is None or runs < max_runs):
        data = mutate(rng, rng.choice(corpus), corpus)
        try:
            one_input(data)
        except (KeyboardInterrupt, SystemExit):  # a stop (Ctrl-C), not the input's finding
            raise
        except BaseException:
            where = CRASH_DIR if crash_dir is None else crash_dir
            where.mkdir(parents=True, exist_ok=True)
            path = where / f"crash-{hashlib.sha1(data).hexdigest()}"
            path.write_bytes(data)
            print(f"fuzz: crash saved to {path}", file=sys.stderr)
            raise
        runs += 1
    return runs


def seconds(text: str) -> float:
    """A run's length: a finite number of seconds greater than 0 (argparse's type)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: a number of seconds greater than 0")
    return value


#: the ``--help`` description, the docstring's first paragraph as a string: ``python -OO``
#: strips docstrings, where argparse read it from (no description until 2026-12-06)
DESCRIPTION = ("Coverage-guided fuzz target for the NEFF-like reader, the trigger decoder and "
               "planning.")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=DESCRIPTION)
    ap.add_argument("--seconds", type=seconds, default=None,
                    help="how long to run (default: $FUZZ_SECONDS, else 60)")
    ap.add_argument("--corpus", type=Path, default=ROOT / "fuzz" / "corpus",
                    help="libFuzzer's corpus folder (atheris only; --pure mutates the seeds)")
    ap.add_argument("--pure", action="store_true", help="the pure-Python loop even with atheris")
    ap.add_argument("--seed", type=int, default=None, help="RNG seed of the pure loop")
    # (arguments this parser does not know go to libFuzzer: its -flag=value ones)
    args, rest = ap.parse_known_args(argv)
    if args.seconds is None:  # read only when --seconds is not given
        try:
            args.seconds = seconds(os.environ.get("FUZZ_SECONDS", "60"))
        except argparse.ArgumentTypeError as err:
            ap.error(f"FUZZ_SECONDS: {err}")
    sys.path.insert(0, str(ROOT))
    try:
        import atheris  # noqa: F401
    except ImportError:
        atheris = None
    pure = atheris is None or args.pure
    # libFuzzer's flags have one dash; a misspelt option of ours (--secnds) is refused
    unknown = rest if pure else [a for a in rest if a.startswith("--")]
    if unknown:
        ap.error(f"unrecognized arguments: {' '.join(unknown)}"
                 + ("" if pure else " (libFuzzer's flags have one dash: -runs=N)"))
    if pure:
        if not args.pure:
            print("fuzz: atheris is not installed; running the pure-Python loop (no coverage "
                  "feedback)", file=sys.stderr)
        try:
            runs = pure_loop(args.seconds, seed_inputs(), args.seed)
        except KeyboardInterrupt:  # as the atheris run says it; no crash saved
            print("KeyboardInterrupt: stopping.", file=sys.stderr)
            return 130
        print(f"fuzz: {runs} inputs in {args.seconds:g} s, no crash", file=sys.stderr)
        return 0
    with atheris.instrument_imports(include=["nrtrewrite"]):
        import nrtrewrite.lower  # noqa: F401
        import nrtrewrite.limits  # noqa: F401
        import nrtrewrite.neff.reader  # noqa: F401
    write_seed_corpus(args.corpus)
    CRASH_DIR.mkdir(parents=True, exist_ok=True)
    # libFuzzer takes whole seconds, and 0 means no limit: at least 1
    lf_args = [sys.argv[0], str(args.corpus), f"-max_total_time={max(1, math.ceil(args.seconds))}",
               "-timeout=20", "-rss_limit_mb=4096", f"-artifact_prefix={CRASH_DIR}/",
               "-print_final_stats=1", *rest]
    atheris.Setup(lf_args, one_input)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())
