"""SGLang's own flag table, and an argparse parser built from it (core, no Textual)."""
