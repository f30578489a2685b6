"""A guided tour in the main window: the controller (:mod:`.controller`), its dock (:mod:`.view`),
the menu entries (:mod:`.actions`) and the worksheet export (:mod:`.worksheet`); the tour files and
their arithmetic are :mod:`explorer.core.tours`."""
