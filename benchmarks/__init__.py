"""Benchmarks that prove the app is live: ``python -m benchmarks [--quick] [--json PATH]``.

Each module measures one thing and returns a flat dict of figures; :mod:`benchmarks.run` prints
them as a table and writes them as one flat JSON object. Timings are wall-clock
(``time.perf_counter``) on whatever machine runs them; nothing here asserts a speed.
"""
