"""Files in and out of the app: opening checkpoints (``opening``, ``hub`` for the Hub cache) and
exporting traces and pictures (``export``).
"""
