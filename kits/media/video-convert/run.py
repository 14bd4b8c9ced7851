#!/usr/bin/env python3
"""video.convert: convert one video (e.g. webm -> mp4) with ffmpeg."""
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # keep the kit folder free of __pycache__
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from capflow_tool import Tool  # noqa: E402

t = Tool("video-convert")
src = t.inputs["input"]
fmt = t.inputs.get("format", "mp4")
# Written in the step folder (the project is read-only to a confined tool):
# the default name is the input's with the new extension.
dst = t.inputs.get("output") or os.path.splitext(os.path.basename(src))[0] + "." + fmt
dst = os.path.join(os.environ.get("CAPFLOW_WORKDIR", "."), dst)
if not os.path.exists(src):
    t.finish(False, f"input {src} does not exist", code="INVALID_INPUT", exit_code=2)
t.event("convert", "info", f"converting {os.path.basename(src)} to {fmt}")
p = subprocess.run(["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-i", src, dst],
                   capture_output=True, text=True)
if p.returncode != 0:
    t.event("convert", "error", "ffmpeg failed", p.stderr[-2000:])
    t.finish(False, "ffmpeg failed", exit_code=p.returncode)
t.finish(True, f"wrote {dst}", {"input": src, "output": dst, "format": fmt, "bytes": os.path.getsize(dst)})
