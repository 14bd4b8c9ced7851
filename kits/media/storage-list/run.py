#!/usr/bin/env python3
"""storage.list: a folder of an rclone remote."""
import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from capflow_tool import Tool  # noqa: E402
import capflow_rclone as rc  # noqa: E402

t = Tool("storage-list")
folder = rc.remote_path(t.inputs["remote"], t.inputs.get("folder") or "/")
args = ["lsjson", folder] + (["-R"] if t.inputs.get("recursive") else [])
out = rc.run(t, args, "list")
entries = [{"path": e["Path"], "name": e["Name"], "bytes": max(e.get("Size", 0), 0), "is_dir": e.get("IsDir", False),
            "modified": e.get("ModTime", "")} for e in json.loads(out or "[]")]
t.finish(True, f"{len(entries)} entries in {folder}", {"entries": entries, "count": len(entries)})
