"""The generation pane: the pipeline's progress, rates and ETA."""
