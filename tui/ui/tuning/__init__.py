"""The tuning form: four knobs, extra flags, preflight, diff, save and apply."""
