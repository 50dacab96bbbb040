print("initpkg/__init__ ran", flush=True)
with open("init_runs.txt", "a") as f:   # a side effect in the user's folder: one line each time this file runs
    f.write("ran\n")
