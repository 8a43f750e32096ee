"""Results and their renderers: the typed records, the terminal tables, the JSON report,
JUnit properties and the plot. Pure on the records; may import ``model``, ``judges``,
``measure`` (pure parts) and ``checks.registry``."""
