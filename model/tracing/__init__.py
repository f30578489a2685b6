"""The trace and its stores: the immutable record of one forward pass (``records``), the schema
that lists every recorded tensor once, the row buffers traces share (``rowstore``) and prefix
reuse (``reuse``).
"""
