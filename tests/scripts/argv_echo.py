import json
import sys

print(json.dumps({"argv": sys.argv, "path0": sys.path[0], "name": __name__}))
