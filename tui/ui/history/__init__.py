"""The history chart and its ranges (the data: ``tui.history``)."""
