"""The operations core: the one door through which anything changes the fleet (no Textual).

``service.FleetOps`` applies, relaunches, kills, rolls back, canaries and rolls out; each
operation holds the operation lock (``lock``), fits its profile to the fleet's ports (``fit``),
runs the retune engine on the real fleet (``runner``, ``target``), records the fleet state and
journals itself (``journal``, ``entries``), and reports typed events (``events``).
``commands`` are the operations as data, ``port`` the one port every front end holds and
``local.LocalFleet`` its implementation on this node; ``cli/`` the headless commands;
``pipeline`` starts and stops the generation job; ``demo`` and ``simfleet`` prepare the demo's
and the tests' simulated fleets.
"""
