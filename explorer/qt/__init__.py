"""The widgets: the session object, the main window, the reusable heatmap and one file per panel."""
