raise ImportError("the user's own orjson.py, not the library")
