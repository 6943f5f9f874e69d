"""``nrtrewrite simulate``: run every rank's emitted bytes and check the collectives bit for bit.

:func:`simulate_output` runs an output folder; :func:`verify_checksums` is the tamper check
the CLI does first.  docs/SIMULATOR.md says what is modelled and how failures are reported.
"""

from nrtrewrite.simulate.artifacts import verify_checksums
from nrtrewrite.simulate.engine import Simulator, simulate_output
from nrtrewrite.simulate.result import SimulationResult, TriggerResult

__all__ = ["Simulator", "SimulationResult", "TriggerResult", "simulate_output",
           "verify_checksums"]
