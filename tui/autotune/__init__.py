"""Autotune: the fleet finds a better configuration by itself while the job keeps running.

Core (no Textual): the candidate space (``space``), the search strategy (``strategy``), the budget
(``budget``), the records and journal entries (``record``), the status document, control
requests and lock (``status``), the search itself (``search``) and ``gpufleet autotune``
(``cli``). Every change of the fleet goes through ``tui.ops.service.FleetOps``.
"""
