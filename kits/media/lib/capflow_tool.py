"""Minimal helper for capflow command tools written in Python (tool protocol, docs/tool-protocol.md)."""
import datetime
import json
import os
import sys
import time


def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Tool:
    def __init__(self, tool_id):
        self.tool_id = tool_id
        self.start = time.time()
        self.feedback = []
        path = os.environ.get("CAPFLOW_INPUT_PATH")
        raw = open(path).read() if path else sys.stdin.read()
        self.inputs = json.loads(raw or "{}")

    def event(self, phase, level, message, detail=""):
        ev = {"phase": phase, "level": level, "message": message, "timestamp": now()}
        if detail:
            ev["detail"] = detail
        self.feedback.append(ev)
        # Live feedback: one JSON object per stderr line becomes a heartbeat.
        print(json.dumps(ev), file=sys.stderr, flush=True)

    def finish(self, success, message, data=None, code=None, exit_code=None):
        if not success and not any(f["level"] == "error" for f in self.feedback):
            self.event("result", "error", message)
        env = {"toolId": self.tool_id, "exitCode": 0 if success else (exit_code or 1), "success": success,
               "timestamp": now(), "message": message, "feedback": self.feedback,
               "duration_ms": int((time.time() - self.start) * 1000)}
        if data is not None:
            env["data"] = data
        if not success:
            env["error"] = {"code": code or "TOOL_FAILURE", "severity": "HIGH", "retryable": code in (None, "TOOL_FAILURE")}
        out = os.environ.get("CAPFLOW_OUTPUT_PATH")
        if out:
            with open(out, "w") as f:
                json.dump(env, f)
        else:
            print(json.dumps(env))
        sys.exit(env["exitCode"])
