"""Autotune: the fleet finds a better configuration by itself while the job keeps running.

Core (no Textual): the candidate space (``space``), the search strategy (``strategy``), the budget
(``budget``), what a search is asked and how it ended (``options``), the fleet it can run on
(``fleet``), the records and journal entries (``record``), the status document, control
requests and lock (``status``), one canary watched for a stop (``watch``), the search itself
(``search``) and ``gpufleet autotune`` (``cli``). Every change of the fleet goes through
``tui.ops.service.FleetOps``.
"""
