"""``nrtrewrite inspect MODEL.neff``: show what the reader decoded (header, members, vars,
replica groups, instruction counts, triggers); ``--json`` for a stable machine form."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from nrtrewrite.cli import (ByteSize, JsonErrorCommand, OneValue, _capped_line, echo_whole,
                            encodable, main, no_dash, plain, print_table, _say, stdout_console,
                            styled)
from nrtrewrite.errors import path_text
from nrtrewrite.neff.container import MAX_MEMBER_BYTES, MAX_TOTAL_BYTES, Limits
from nrtrewrite.neff.reader import read_model
from nrtrewrite.neff.summary import INSPECT_FORMAT, model_to_dict


def format_ranks(ranks: list[int] | tuple[int, ...]) -> str:
    """Compress a rank list into runs: ``0-7,16,18-19``."""
    parts: list[str] = []
    i = 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        parts.append(str(ranks[i]) if i == j else f"{ranks[i]}-{ranks[j]}")
        i = j + 1
    return ",".join(parts)


def _operand(op: dict) -> str:
    name = op["var"] if op["var"] is not None else f"#{op['var_id']}"
    if "ap" not in op:
        return f"{name}+{op['offset']}"
    ap = op["ap"]
    dims = "".join(f"[{s},{n}]" for s, n in ap["dims"] if not (s == 0 and n == 1))
    return (f"{name}+{ap['start']} p{ap['partition_start']}:"
            f"{ap['partition_start'] + ap['partition_count']}{dims}")


def _sync(s: dict | None) -> str:
    if s is None or not any(s.values()):
        return "-"
    return (f"w{s['wait_mode']}:{s['wait_idx']} u{s['update_mode']}:{s['update_idx']} "
            f"v{s['semaphore_value']}")


def _row(table: Table, *cells) -> None:
    """Add a row of plain text (never parsed as rich markup)."""
    table.add_row(*(plain(str(c)) for c in cells))


def _console() -> Console:
    return stdout_console(240, highlight=False, soft_wrap=False)


def render(doc: dict, con: Console) -> None:
    """Print the ``inspect`` document with rich tables."""
    h = doc["header"]
    verified = "verified" if doc["hash_verified"] else "NOT verified"
    con.print(styled(plain(doc["file"], "bold"), f"  NEFF-like, pkg_version {h['pkg_version']} "
                     f"(tar.gz + {h['hash_algorithm']}, hash {verified})"),
              soft_wrap=True)  # one line, never wrapped: the path whole (docs/CLI.md)
    ht = Table(title="header", show_header=False, title_justify="left")
    ht.add_column("field", style="cyan")
    ht.add_column("value")
    tpn = h["tpb_per_node"]
    last = max((i for i, v in enumerate(tpn) if v), default=-1)
    for key, val in (
        ("name", h["name"]), ("neff_version", f"{h['neff_version_major']}.{h['neff_version_minor']}"),
        ("neff_build_version", h["neff_build_version"]), ("uuid", h["uuid"]),
        ("num_tpb", h["num_tpb"]), ("requested_tpb_count", h["requested_tpb_count"]),
        ("tpb_per_node", ",".join(map(str, tpn[:last + 1])) if last >= 0 else "0 (all 64)"),
        ("feature_bits", f"0x{h['feature_bits']:x}"), ("lnc_size", h["lnc_size"]),
        ("header_size", h["header_size"]), ("data_size", h["data_size"]),
        ("hash", h["hash"] if h["hash_algorithm"] == "sha256" else h["hash"][:32]),
        ("world", f"{len(doc['world'])} ranks: {format_ranks(doc['world'])}"),
    ):
        _row(ht, key, str(val))
    print_table(con, ht)

    mt = Table(title="members", title_justify="left")
    mt.add_column("name")
    mt.add_column("bytes", justify="right")
    mt.add_column("note")
    for m in doc["members"]:
        _row(mt, m["name"], str(m["size"]), "extra (passed through)" if m["extra"] else "")
    print_table(con, mt)

    for sg in doc["subgraphs"]:
        vt = Table(title=plain(f"{sg['name']}: vars"), title_justify="left")
        for col in ("var_id", "name", "type", "size", "partitions"):
            vt.add_column(col, justify="right" if col in ("var_id", "size", "partitions")
                          else "left")
        for v in sg["vars"]:
            _row(vt, str(v["var_id"]), v["name"], v["type"], str(v["size"]),
                       "" if v["partitions"] is None else str(v["partitions"]))
        print_table(con, vt)
        gt = Table(title=plain(f"{sg['name']}: replica groups"), title_justify="left")
        gt.add_column("group", justify="right")
        gt.add_column("size", justify="right")
        gt.add_column("ranks")
        for g, ranks in enumerate(sg["replica_groups"]):
            _row(gt, str(g), str(len(ranks)), format_ranks(ranks))
        print_table(con, gt)
        st = Table(title=plain(f"{sg['name']}: instructions per engine"), title_justify="left")
        for col in ("engine", "words", "pseudo-trigger", "other-pseudo", "regular"):
            st.add_column(col, justify="left" if col == "engine" else "right")
        st.add_column("opcodes")
        times = "×" if encodable("×") == "×" else "*"  # (0x00\xd72 reads as a number)
        for s in sg["streams"]:
            c = s["classes"]
            ops = " ".join(f"{op}{times}{n}" for op, n in s["opcodes"].items())
            _row(st, s["engine"], str(s["instructions"]), str(c["pseudo-trigger"]),
                       str(c["other-pseudo"]), str(c["regular"]), ops)
        print_table(con, st)

    tt = Table(title=f"triggers ({len(doc['triggers'])})", title_justify="left")
    for col in ("#", "subgraph", "engine", "index", "opcode", "ctype", "op", "dtype", "alu_op",
                "group", "size", "stream", "src", "dst", "num_elements", "bytes in/out",
                "sync"):
        tt.add_column(col, justify="right" if col in ("#", "index", "group", "size", "stream",
                                                       "num_elements") else "left")
    for t in doc["triggers"]:
        stream = str(t["stream_id"]) + (f" ch{t['channel_id']}" if t["num_words"] == 2 else "")
        sync = _sync(t["sync"])
        if t["ext_sync"] is not None and any(t["ext_sync"].values()):
            sync += f" / ext {_sync(t['ext_sync'])}"
        _row(tt, str(t["ordinal"]), t["subgraph"], t["engine"], str(t["index"]),
                   f"0x{t['opcode']:02x}", t["ctype"], t["op"], t["dtype"],
                   t["alu_op"] or "-", str(t["replica_group_id"]), str(t["group_size"]),
                   stream, _operand(t["src"]), _operand(t["dst"]), str(t["num_elements"]),
                   f"{t['in_bytes']}/{t['out_bytes']}", sync)
    print_table(con, tt)
    if doc["kicks"]:  # a lowered NEFF: each trigger word's TOPSP_KICK (docs/FORMATS.md §9)
        kt = Table(title=f"kick words ({len(doc['kicks'])})", title_justify="left")
        for col in ("subgraph", "engine", "index", "trigger", "word", "spad_index", "sync"):
            kt.add_column(col, justify="right" if col in ("index", "trigger", "word",
                                                          "spad_index") else "left")
        for k in doc["kicks"]:
            _row(kt, k["subgraph"], k["engine"], str(k["index"]), str(k["trigger"]),
                 str(k["word"]), str(k["spad_index"]), _sync(k["sync"]))
        print_table(con, kt)


class _InspectCommand(JsonErrorCommand):
    """``inspect``: with ``--json``, a model that cannot be read is ``{"format", "file",
    "error"}`` on stdout (then the error line on stderr, exit 2)."""

    @staticmethod
    def error_document(params: dict, why: str) -> dict:
        return {"format": INSPECT_FORMAT, "file": path_text(params.get("model_path")),
                "error": why}


#: ``inspect``'s ``--help`` text (not a docstring: see :data:`nrtrewrite.cli.MAIN_HELP`)
INSPECT_HELP = ("Decode and validate MODEL.neff and show its header, members, vars, replica "
                "groups, instruction counts per engine and every collective trigger.")


@main.command("inspect", cls=_InspectCommand, help=INSPECT_HELP)
@click.argument("model_path", metavar="MODEL.neff", callback=no_dash)
@click.option("--json", "as_json", is_flag=True, help="Print a stable JSON document instead.")
@click.option("--no-verify-hash", is_flag=True,
              help="Skip the payload hash check (a warning is printed to stderr).")
@click.option("--max-total-bytes", cls=OneValue, type=ByteSize(), default=MAX_TOTAL_BYTES,
              show_default=True, help="Limit on the decompressed payload (tar stream); "
              "bytes, or 512KiB, 64MiB, 4GiB ...")
@click.option("--max-member-bytes", cls=OneValue, type=ByteSize(), default=MAX_MEMBER_BYTES,
              show_default=True, help="Limit on one tar member; bytes, or 512KiB, 2GiB ...")
def inspect_cmd(model_path: str, as_json: bool, no_verify_hash: bool, max_total_bytes: int,
                max_member_bytes: int) -> None:
    """The command (its help: :data:`INSPECT_HELP`)."""
    if model_path == "":  # (reading "" fails with no file to name)
        raise click.BadParameter("an empty path", param_hint="'MODEL.neff'")
    limits = Limits(max_total_bytes=max_total_bytes, max_member_bytes=max_member_bytes)
    model = read_model(model_path, verify_hash=not no_verify_hash, limits=limits)
    for w in model.warnings:  # best effort: a stderr that cannot be written loses them
        loc = str(w.where)
        _say(_capped_line(f"nrtrewrite: warning: {loc + ': ' if loc else ''}{w.message}"))
    doc = model_to_dict(model)
    if as_json:
        echo_whole(json.dumps(doc, indent=2))
    else:
        render(doc, _console())


__all__ = ["inspect_cmd", "format_ranks", "render"]
