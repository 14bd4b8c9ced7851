#!/usr/bin/env python3
"""storage.upload: one file to an rclone remote."""
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from capflow_tool import Tool  # noqa: E402
import capflow_rclone as rc  # noqa: E402

t = Tool("storage-upload")
src, remote = t.inputs["file"], t.inputs["remote"]
if not os.path.isfile(src):
    t.finish(False, f"file {src} does not exist", code="INVALID_INPUT", exit_code=2)
name = t.inputs.get("name") or os.path.basename(src)
dest = rc.remote_path(remote, os.path.join(t.inputs.get("folder") or "/", name))
t.event("upload", "info", f"uploading {os.path.basename(src)} to {dest}")
rc.run(t, ["copyto", src, dest], "upload")
t.finish(True, f"uploaded {name} to {dest}", {"remote": remote, "path": dest, "bytes": os.path.getsize(src)})
