"""The error every layer raises for input the user can fix (a book file, a data folder): DataError, one line naming the
file and what to do."""
from __future__ import annotations


class DataError(Exception):
    """Bad input the user can fix: the message names the file and what to do."""
