"""What a simulation reports: one verdict per trigger, plus the program-level error if any."""

from __future__ import annotations

from dataclasses import dataclass, field

from nrtrewrite.errors import capped_why, path_text

MATCH = "match"
MISMATCH = "mismatch"
ERROR = "error"
NOT_RUN = "not run"
INCOMPLETE = "incomplete"  # some ranks checked and matched, the run stopped before the others


@dataclass
class TriggerResult:
    trigger: int
    label: str
    op: str
    dtype: str
    num_elements: int
    group_size: int
    status: str = NOT_RUN
    ranks_checked: int = 0
    mismatched_elements: int = 0
    unwritten_bytes: int = 0
    #: what the verdict says, whole (a protocol error's reason: ``SimulationError.reason``);
    #: the table's cell and ``--json``'s ``detail`` cut it as each shows it
    detail: str = ""
    #: how many characters of the whole detail ``detail`` does not hold (a reason held
    #: cut, past ``errors.MAX_HELD_WHY_CHARS``: ``SimulationError.left_out``)
    detail_left_out: int = 0
    first_mismatch: dict | None = None
    #: the trigger's ALU op as the manifest's ``alu_op`` (``ADD``, ``MAX``, ``MIN``; None for
    #: an all-gather)
    alu_op: str | None = None
    #: what the trigger was lowered to, the manifest's ``algorithm`` (``RING``, ``HIER``,
    #: ``KANGARING``, ...; FORMATS §1.1); None where the manifest was not read
    algorithm: str | None = None

    def fail(self, status: str, detail: str) -> None:
        if self.status in (MATCH, NOT_RUN) or not self.detail:
            self.status = status
            self.detail = detail
            self.detail_left_out = 0

    def to_json(self) -> dict:
        return {"trigger": self.trigger, "op": self.op, "dtype": self.dtype,
                "alu_op": self.alu_op,
                "num_elements": self.num_elements, "group_size": self.group_size,
                "algorithm": self.algorithm,
                "status": self.status, "ranks_checked": self.ranks_checked,
                "mismatched_elements": self.mismatched_elements,
                "unwritten_bytes": self.unwritten_bytes,
                # (capped as a reason is shown, docs/CLI.md "Errors": JSON holds every
                # character, so none is escaped for a stream's encoding)
                "detail": capped_why(self.detail, len(self.detail) + self.detail_left_out),
                "first_mismatch": self.first_mismatch}


@dataclass
class SimulationResult:
    output: str
    seed: int
    triggers: list[TriggerResult] = field(default_factory=list)
    error: str | None = None  # program-level protocol error (SimulationError line, capped)
    #: the protocol error's line whole, before :func:`~nrtrewrite.errors.cut_line`: the text's
    #: ``protocol error:`` line escapes it for stdout's encoding, then cuts (docs/CLI.md)
    error_line: str | None = field(default=None, repr=False, compare=False)
    #: the protocol error's location as its line names it, its reason (whole up to
    #: ``errors.MAX_HELD_WHY_CHARS``: ``SimulationError.reason``) and how many characters of
    #: the whole reason that does not hold (``SimulationError.left_out``): what a message
    #: quoting the error takes, so that it is cut once, where that message is shown
    error_where: str | None = field(default=None, repr=False, compare=False)
    error_reason: str | None = field(default=None, repr=False, compare=False)
    error_left_out: int = field(default=0, repr=False, compare=False)
    error_trigger: int | None = None
    stats: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None and all(t.status == MATCH for t in self.triggers)

    def to_json(self) -> dict:
        return {"format": "nrtrewrite-simulate", "format_version": 1,
                "output": path_text(self.output),  # (the same text whatever the locale)
                "seed": self.seed, "ok": self.ok, "error": self.error,
                "error_trigger": self.error_trigger,
                "triggers": [t.to_json() for t in self.triggers], "stats": self.stats}
