"""How a quantity of the run is written for people, one way everywhere: the findings' messages (analysis) and
the page (render) both import it from the data model."""
from __future__ import annotations

FLOP_UNITS = (("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3))


def format_flops(x: float) -> str:
    """A FLOP count in the largest unit it reaches, 3 significant digits: '1.23 TFLOP'; append '/s' for a rate."""
    for unit, scale in FLOP_UNITS:
        if x >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x:.3g} FLOP"
