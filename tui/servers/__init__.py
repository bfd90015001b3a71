"""Server layer: find SGLang server processes and probe them over HTTP (core, no Textual)."""
