"""Guided tours, without Qt: the tour file (:mod:`.tourfile`), the expressions and sentences a step
computes from the trace (:mod:`.expressions`, :mod:`.templates`, :mod:`.facts`), questions and their
reveal (:mod:`.questions`), where tours and models are found (:mod:`.files`) and the worksheet (:mod:`.worksheet`)."""
