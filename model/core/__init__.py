"""The model core: its config, its components (norms, RoPE, MLPs), the transformer itself and the
what-if interventions it runs with. Everything else in ``model`` is built on this wing.
"""
