"""The Qt-free half of the explorer: what every panel draws, computed from a trace.

Nothing here imports PySide6 or pyqtgraph (an import-linter contract in pyproject.toml checks it),
so all of it is testable without a display.
"""
