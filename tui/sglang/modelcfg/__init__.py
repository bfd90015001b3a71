"""A memory-plan model from any model's own ``config.json`` (issue 29, part 3).

``locate`` finds the config (a local folder, or the Hugging Face cache for a hub id, never the
network); ``fields`` reads it with one-line errors that name the missing field and the file;
``shapes`` derives what SGLang derives (layers by type, heads, head dims, the Mamba/GDN state
shapes and dtypes, the MTP draft, multimodal, context length); ``safetensors`` and ``params``
give the weight bytes (from the checkpoint's headers, or estimated from the shapes); ``spec`` turns
all of it into a ``tui.sglang.models.ModelSpec`` and is the one door (``resolve_model``) the
preflight, the simulator and ``gpufleet plan`` go through.
"""
