"""Transformer Explorer, the desktop app: type, and watch a small transformer's insides change.

``explorer.core`` is Qt-free (numpy, torch and ``model`` only); ``explorer.qt`` holds the widgets.
"""
