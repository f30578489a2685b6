"""The Train New Model dialog (``dialog``) and the training run it starts as a process (``run``).
"""
