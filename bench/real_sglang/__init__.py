"""A real SGLang server on the GPU machine: bundle, tiny model, recorder, harness."""
