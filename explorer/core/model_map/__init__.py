"""The Model map's arithmetic, without Qt: its layout from the trace schema (:mod:`.layout`) and the
small arrays each box draws, with what they hold in words (:mod:`.boxes`)."""
