"""SGLang knowledge as pure functions: model shapes, the memory planner, the flags.

``flagtable`` is SGLang's own flag table (generated from its parser) and the parser rebuilt from
it; ``flags`` is what the simulator models on top. Apart from the table's generator (a
development tool), nothing here does I/O beyond reading the shipped table; the simulator, the
tuning form's preflight and the log parser share it.
"""
