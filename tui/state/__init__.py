"""gpufleet's own state on disk: one locked store of what runs on each GPU, and its file rules.

``files``: locked, atomic JSON documents whose damage is an error naming the file, never "empty".
``fleet_state``: per GPU the server's identity, its port, and its current and previous profile.
"""
