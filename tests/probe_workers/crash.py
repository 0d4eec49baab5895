"""A probe worker whose rank 1 fails: the launcher must report its message."""
import os
import sys

if __name__ == "__main__":
    if os.environ.get("RANK") == "1":
        print("rank one cannot find its GPU", file=sys.stderr)
        sys.exit(3)
