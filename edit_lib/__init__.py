"""edit_lib: the shared library behind the EDIT reproduction notebooks (see README.md)."""
__version__ = "0.1.0"
