raise ImportError("the user's own pandas.py, not the library")
