raise ImportError("the user's own plotly.py, not the library")
