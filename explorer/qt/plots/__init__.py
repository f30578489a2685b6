"""The plot items every panel draws with: heatmaps, token tick labels, zoom, the resolution-aware
matrix view and the small pyqtgraph items.
"""
