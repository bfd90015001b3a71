"""SGLang knowledge as pure functions: model shapes, the memory planner, the flag set.

Nothing here does I/O; the simulator, the tuning form's preflight and the log parser share it.
"""
