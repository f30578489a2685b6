"""The screen check and the gallery's walker: the real main window, every panel and tab, looked at
(text cut, sideways scrolling, plot heights, legends over data, WCAG contrast) and read (sentences
against the trace). ``tests/test_screens.py`` runs it; ``python -m explorer.gallery`` draws it."""
