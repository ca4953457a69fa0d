"""firstlight's version, in one place: ``pyproject.toml`` reads it (``[tool.setuptools.dynamic]``), the package and
the reports import it from here (a leaf: it imports nothing)."""

__version__ = "0.1.0"
