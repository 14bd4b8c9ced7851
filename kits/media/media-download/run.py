#!/usr/bin/env python3
"""media.download: one file from a URL with yt-dlp, progress as feedback."""
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # keep the kit folder free of __pycache__
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from capflow_tool import Tool  # noqa: E402

t = Tool("media-download")
url = t.inputs["url"]
wd = os.environ.get("CAPFLOW_WORKDIR", ".")
name = t.inputs.get("filename") or "%(title).120B.%(ext)s"
done = os.path.join(wd, ".media-download-path")
cmd = ["yt-dlp", "--no-config", "--no-cache-dir", "--no-playlist", "--newline", "--quiet", "--no-warnings",
       "--progress", "--progress-template", "download:PROGRESS %(progress.downloaded_bytes)s %(progress.total_bytes)s",
       "--print-to-file", "after_move:filepath", done,
       "-f", t.inputs.get("format") or "best", "-o", os.path.join(wd, name), url]
t.event("download", "info", f"downloading {url}")
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
last = -1
for line in p.stdout:
    parts = line.split()
    if len(parts) == 3 and parts[0] == "PROGRESS" and parts[1].isdigit():
        got, total = int(parts[1]), parts[2]
        # One event per tenth of the file (or per 10 MiB when the size is unknown).
        step = int(total) // 10 if total.isdigit() and int(total) > 0 else 10 << 20
        if got // max(step, 1) != last:
            last = got // max(step, 1)
            t.event("progress", "info", f"{got} of {total} bytes" if total.isdigit() else f"{got} bytes")
err = p.stderr.read()
p.wait()
if p.returncode != 0:
    msg = next((l for l in err.splitlines() if l.startswith("ERROR:")), err.strip()[-500:] or "yt-dlp failed")
    msg = msg.split("; please report this issue")[0]
    # A URL that is not media, or not there, will not work on a retry.
    code = "INVALID_INPUT" if ("Unsupported URL" in msg or "HTTP Error 404" in msg or "not a valid URL" in msg) else "TOOL_FAILURE"
    t.event("download", "error", "yt-dlp failed", err[-2000:])
    t.finish(False, msg, code=code, exit_code=p.returncode)
path = open(done).read().strip().splitlines()[-1]
os.remove(done)
t.finish(True, f"downloaded {os.path.basename(path)}", {"path": path, "bytes": os.path.getsize(path), "url": url,
                                                         "title": os.path.splitext(os.path.basename(path))[0]})
