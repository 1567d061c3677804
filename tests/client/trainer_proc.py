"""A fake trainer process for the SIGKILL test: logs steps, checkpoints, can be resumed.

usage: trainer_proc.py URL HOME START END LOGGED_FILE CKPT_FILE CKPT_EVERY SLEEP
Writes each step to LOGGED_FILE *after* log() returned; at every checkpoint it calls
run.flush() (everything logged so far is then on disk) and records the step in CKPT_FILE.
"""

from __future__ import annotations

import os
import sys
import time

import trainer_client as sw


def main() -> None:
    url, home, start, end, logged, ckpt, every, pause = sys.argv[1:9]
    start, end, every, pause = int(start), int(end), int(every), float(pause)
    run = sw.init("e2e", "sigkill-trainer", url=url, home=home, fit_metric="m")
    with open(logged, "a", buffering=1) as out:
        for step in range(start, end):
            run.log({"m": step / 1000.0, "pid": float(os.getpid())}, step=step,
                    compute=float(step))
            out.write(f"{step}\n")
            if step % every == 0:
                run.flush()
                tmp = ckpt + ".tmp"
                with open(tmp, "w") as f:
                    f.write(str(step))
                os.replace(tmp, ckpt)
            time.sleep(pause)
    left = run.finish(timeout=120)
    sys.exit(0 if left == 0 else 3)


if __name__ == "__main__":
    main()
