"""The Training panel (``panel``): the snapshots of a run, its curves (``curves``), the difference
of two snapshots (``snapshot_diff``) and where the snapshots come from (``snapshot_source``).
"""
