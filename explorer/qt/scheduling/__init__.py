"""Where and when work runs: the worker thread and its jobs (``jobs``), pacing a slow model's
panel refreshes (``pacing``) and a background task with a progress dialog (``background``).
"""
