"""Training: the ``python -m model.train`` loop, its arguments, data, progress log, torchrun
support, count-based baselines, and the snapshots of a run with the curves over them.
"""
