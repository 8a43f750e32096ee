"""The pytest side: options, configuration state, collection, running checks in their
sandbox, collecting records, declared hooks and fixtures. The only package that imports
pytest's hook machinery; ``plugin.py`` is a thin layer over it."""
