"""The Why attention? lesson: the panel and its parts (``views``)."""
