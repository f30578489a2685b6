"""Small widgets that several panels share: token chips, the flow layout, the pin note, the
scrolling panel, the interventions line and the explain-target menu.
"""
