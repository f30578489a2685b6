"""Where and when work runs: the GUI thread or the worker for the session's traces and panels' jobs
(``scheduler``), the worker thread itself (``jobs``), pacing a slow model's panel refreshes
(``pacing``) and long work with a progress dialog (``background``).
"""
