#!/usr/bin/env python3
"""image.thumbnail: scale an image (or a video's first frame) to a given width with ffmpeg."""
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # keep the kit folder free of __pycache__
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from capflow_tool import Tool  # noqa: E402

t = Tool("image-thumbnail")
src = t.inputs["input"]
width = int(t.inputs.get("width", 320))
# Written in the step folder (the project is read-only to a confined tool).
dst = t.inputs.get("output") or os.path.splitext(os.path.basename(src))[0] + ".thumb.png"
dst = os.path.join(os.environ.get("CAPFLOW_WORKDIR", "."), dst)
if not os.path.exists(src):
    t.finish(False, f"input {src} does not exist", code="INVALID_INPUT", exit_code=2)
t.event("scale", "info", f"scaling {os.path.basename(src)} to width {width}")
p = subprocess.run(["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-i", src,
                    "-vf", f"scale={width}:-1", "-frames:v", "1", dst], capture_output=True, text=True)
if p.returncode != 0:
    t.event("scale", "error", "ffmpeg failed", p.stderr[-2000:])
    t.finish(False, "ffmpeg failed", exit_code=p.returncode)
t.finish(True, f"wrote {dst}", {"input": src, "output": dst, "width": width, "bytes": os.path.getsize(dst)})
