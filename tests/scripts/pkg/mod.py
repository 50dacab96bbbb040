import json
import sys

print(json.dumps({"argv": sys.argv, "name": __name__}))
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
