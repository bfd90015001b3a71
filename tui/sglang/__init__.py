"""SGLang knowledge as pure functions: model shapes, the memory planner, the flags.

``flagtable`` is SGLang's own flag tables, one per release 0.5.17 to 0.5.23 (each generated from
that release's parser), and the parser rebuilt from each; ``releases`` is what else each release
has (endpoints, log lines, metrics), read from its source; ``flags`` is what the simulator models
on top. Apart from the table's generator (a
development tool), nothing here does I/O beyond reading the shipped table; the simulator, the
tuning form's preflight and the log parser share it.
"""
