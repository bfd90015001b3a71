"""``gpufleet replay``: the console on the recorded history, at a time cursor."""
