#!/usr/bin/env python3
"""yadisk.download: a file from a Yandex Disk public link, through the disk's public API
(GET /v1/disk/public/resources/download?public_key=URL answers the file's download href)."""
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

sys.dont_write_bytecode = True  # keep the kit folder free of __pycache__
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from capflow_tool import Tool  # noqa: E402

API = os.environ.get("CAPFLOW_YADISK_API") or "https://cloud-api.yandex.net"
CHUNK = 1 << 20

t = Tool("yadisk-download")
url = t.inputs["url"]
wd = os.path.realpath(os.environ.get("CAPFLOW_WORKDIR", "."))


def fail(msg, code="TOOL_FAILURE", detail=""):
    t.event("download", "error", msg, detail)
    t.finish(False, msg, code=code)


def api(endpoint, **query):
    q = urllib.parse.urlencode({k: v for k, v in query.items() if v})
    req = urllib.request.Request(f"{API.rstrip('/')}{endpoint}?{q}", headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        body = e.read(2000).decode("utf-8", "replace")
        try:
            why = json.loads(body).get("description") or body
        except ValueError:
            why = body
        # Not found or not public: a retry will not help.
        code = "INVALID_INPUT" if e.code in (400, 403, 404) else ("DEPENDENCY_UNAVAILABLE" if e.code >= 500 else "TOOL_FAILURE")
        fail(f"the disk's public API answered HTTP {e.code} for {url}: {why}", code, body)
    except (urllib.error.URLError, OSError, ValueError) as e:
        fail(f"cannot reach the disk's public API at {API}: {e}", "DEPENDENCY_UNAVAILABLE")


meta = api("/v1/disk/public/resources", public_key=url, path=t.inputs.get("path"))
if meta.get("type") == "dir":
    fail(f"{url} is a shared folder: give path, the file inside it", "INVALID_INPUT")
name = os.path.basename(meta.get("name") or "download")
if name in ("", ".", ".."):
    name = "download"
href = api("/v1/disk/public/resources/download", public_key=url, path=t.inputs.get("path")).get("href")
if not href:
    fail("the disk's public API gave no download link")

folder = os.path.realpath(os.path.join(wd, t.inputs.get("dest") or "."))
if folder != wd and not folder.startswith(wd + os.sep):
    fail(f"dest {t.inputs.get('dest')!r} leaves the step folder", "INVALID_INPUT")
os.makedirs(folder, exist_ok=True)
out = os.path.join(folder, name)
total = meta.get("size")
t.event("download", "info", f"downloading {name}" + (f" ({total} bytes)" if total else ""))
got, last = 0, -1
try:
    with urllib.request.urlopen(href, timeout=60) as r, open(out + ".part", "wb") as f:
        while True:
            chunk = r.read(CHUNK)
            if not chunk:
                break
            f.write(chunk)
            got += len(chunk)
            step = total // 10 if total else 10 << 20
            if got // max(step, 1) != last:
                last = got // max(step, 1)
                t.event("progress", "info", f"{got} of {total} bytes" if total else f"{got} bytes")
except (urllib.error.URLError, OSError) as e:
    fail(f"downloading {name} failed: {e}")
if total and got != total:
    fail(f"downloading {name} ended at {got} of {total} bytes")
os.replace(out + ".part", out)
t.finish(True, f"downloaded {name}", {"path": out, "bytes": got, "url": url, "name": name})
