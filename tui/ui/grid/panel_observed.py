"""What a GPU panel says of the memory pools, the prefix cache, the draft and the energy.

Words only (no widget): ``panel_lines`` places them in the full and the compact layout, the
detail screen reuses them. Why each pool on its own: SGLang's ``token_usage`` is the largest of
the full-attention, sliding-window and Mamba pools, so Mamba pressure read as KV pressure (sglang
#5979); the panel never shows that one number alone.
"""

from __future__ import annotations

import math

from textual.content import Content

from tui.fleet.energy import GpuEnergy
from tui.fleet.snapshot import ServerSnapshot
from tui.fleet.speculative import SpecDecode
from tui.ui.format import NA, pct, sig3_text
from tui.ui.grid.line_cache import line


def has_swa(server: ServerSnapshot) -> bool:
    """Whether the server's model has sliding-window layers, as far as can be told.

    SGLang exports ``swa_token_usage`` as 0 on a model without them: 0 cannot tell "no SWA
    layers" from "an idle SWA pool", so the gauge shows once the pool holds a token.
    """
    return server.swa_usage is not None and server.swa_usage > 0


def has_mamba(server: ServerSnapshot) -> bool:
    """Whether the model has a Mamba pool (its log sized one, or its gauge reads above 0)."""
    return server.mamba_slots is not None or bool(server.mamba_usage)


def pool_parts(server: ServerSnapshot, short: bool = False) -> list[str]:
    """Each pool's use, the prefix cache's hit rate: ``KV 54%``, ``SWA 3%``, ``mamba 20%``,
    ``hit 41%`` (the SWA and Mamba ones where the model has them, the hit rate where the
    server exports it); ``short``: the compact layout's ``m20%``."""
    parts = [f"KV {pct(server.token_usage, 100)}"]
    if has_swa(server):
        parts.append(f"SWA {pct(server.swa_usage, 100)}")
    if has_mamba(server):
        mamba = pct(server.mamba_usage, 100)
        parts.append(f"m{mamba}" if short else f"mamba {mamba}")
    if server.cache_hit_rate is not None:
        parts.append(f"hit {pct(server.cache_hit_rate, 100)}")
    return parts


def pools_line(server: ServerSnapshot, short: bool = False) -> Content:
    """``pool_parts`` in one line (two spaces apart, one in the compact layout)."""
    return line(("  " if not short else " ").join(pool_parts(server, short)))


def spec_words(spec: SpecDecode | None) -> str:
    """``spec EAGLE accept 2.71 · 68%  steps 3``; ``spec none`` when the server runs no draft.

    The accept length is the tokens a verify yields; the rate the share of the draft's tokens
    accepted; the steps the draft steps per verify in use (the seed's MTP pays or not by them).
    """
    if spec is None:
        return "spec none"
    parts = ["spec"]
    if spec.algorithm:
        parts.append(spec.algorithm)
    if spec.accept_length is None:
        parts.append("no verify yet")
    else:
        rate = "" if spec.accept_rate is None else f" · {pct(spec.accept_rate, 100)}"
        parts.append(f"accept {spec.accept_length:.2f}{rate}")
    if spec.steps:
        parts.append(f" steps {spec.steps}")
    return " ".join(parts)


def spec_line(server: ServerSnapshot) -> Content:
    """``spec_words`` as a panel line."""
    return line(spec_words(server.spec))


WATTS_STEP = 10
"""The window's mean power on a panel to the nearest 10 W, its tokens per joule to two
significant digits. Why: both are re-read at every poll (the meter bridges with the power
samples), and at full precision the line was drawn again every second on every panel (+80 %
bytes to the terminal under load); a 5-minute mean read to 10 W and 5 % is what a panel is
read for (the detail screen keeps three digits)."""


def energy_words(energy: GpuEnergy, digits: int = 2) -> str:
    """``energy 2.3 tok/J  avg 610 W`` over the window; on a card two slots share, ``energy
    2.3 tok/J  shared with GPU 0`` (the joules are the card's, the tokens this slot's);
    ``digits``: the tokens per joule's significant digits (3: the watt too)."""
    per_joule = NA if energy.tokens_per_joule is None else _sig(energy.tokens_per_joule, digits)
    head = f"energy {per_joule} tok/J"
    shared = energy.shared_words()
    if shared:
        return f"{head}  {shared}"
    if energy.watts is None:
        return head
    step = 1 if digits >= 3 else WATTS_STEP
    return f"{head}  avg {round(energy.watts / step) * step:.0f} W"


def _sig(value: float, digits: int) -> str:
    """``value`` to ``digits`` significant digits, thousands separated (``sig3_text`` at 3)."""
    if digits >= 3:
        return sig3_text(value)
    if value == 0:
        return "0"
    places = digits - 1 - math.floor(math.log10(abs(value)))
    return f"{round(value, places):,.{max(0, places)}f}"


def energy_line(energy: GpuEnergy | None) -> Content | None:
    """``energy_words`` as a panel line; None without a meter on this GPU."""
    return None if energy is None else line(energy_words(energy))
