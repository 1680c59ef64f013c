import whoqa.core.numerics  # noqa: F401  (before NumPy or torch load: the same numbers on every machine)
