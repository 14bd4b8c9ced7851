#!/usr/bin/env bash
# Prints a base port P for a private cluster (scripts/cluster.sh) whose
# every port is free now: P and the offsets cluster.sh and soak.sh count
# from it (services, membership, the Web UI, PostgreSQL, the S3 store). The
# suite takes free ports, never fixed ones: it passes beside anything else
# listening on the machine.
set -euo pipefail
exec python3 - "$@" <<'PY'
import random, socket
offsets = [0, 1, 2, 3, 6, 10, 13, 40, 767, 1000, 2700, 2701, 2702, 2703, 2704, 2705, 2706, 8199]
def free(port):
    s = socket.socket()
    try:
        s.bind(("", port))
        return True
    except OSError:
        return False
    finally:
        s.close()
for _ in range(500):
    p = random.randrange(10000, 21000)  # p + 8199 stays a port; p + 2706 below cluster.sh's 30061 + 2706
    if all(free(p + o) for o in offsets):
        print(p)
        raise SystemExit(0)
raise SystemExit("no free base port found for a private cluster")
PY
