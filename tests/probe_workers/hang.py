"""A probe worker that never finishes: the launcher must time out and kill it."""
import os
import time
from pathlib import Path

if __name__ == "__main__":
    Path(os.environ["PROBE_PID_DIR"], f"rank{os.environ['RANK']}.pid").write_text(str(os.getpid()))
    time.sleep(3600)
