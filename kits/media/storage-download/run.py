#!/usr/bin/env python3
"""storage.download: one file from an rclone remote into the step folder."""
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from capflow_tool import Tool  # noqa: E402
import capflow_rclone as rc  # noqa: E402

t = Tool("storage-download")
remote, path = t.inputs["remote"], t.inputs["path"]
src = rc.remote_path(remote, path)
dest = os.path.join(os.environ.get("CAPFLOW_WORKDIR", "."), t.inputs.get("name") or os.path.basename(path.rstrip("/")))
t.event("download", "info", f"downloading {src}")
rc.run(t, ["copyto", src, dest], "download")
t.finish(True, f"downloaded {src}", {"path": dest, "bytes": os.path.getsize(dest), "source": src})
