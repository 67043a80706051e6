"""API objects and the rules about them: models, quantities, selectors, validation, defaulting.

Pure data and functions; nothing here does I/O, so every other layer may use it.
"""
