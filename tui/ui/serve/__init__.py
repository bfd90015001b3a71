"""``gpufleet serve``: the console in a browser through textual-serve, behind a token.

``auth`` checks the token on every HTTP and websocket request; ``server`` runs one console
process (an argv list, never a shell) per browser session; ``cli`` is the command.
"""
