"""A real SGLang server on the GPU machine: the bundle, the tiny model, the recorder, harness."""
