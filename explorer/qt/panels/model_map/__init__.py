"""The Model map panel (:mod:`.panel`), its canvas (:mod:`.canvas`) and the canvas geometry (:mod:`.geometry`)."""
