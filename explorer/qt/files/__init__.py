"""Files in and out of the app: the File menu's actions (``actions``), opening checkpoints in one pass
(``opening``: inspect, ask, load once; ``hub`` for the Hub cache) and exporting traces and pictures
(``export``).
"""
