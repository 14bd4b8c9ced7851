"""rclone for capflow's storage tools: where the remotes are configured, and
its failures as contract error codes (docs/transfer.md)."""
import json
import os
import subprocess


def base_args():
    # Remotes come from RCLONE_CONFIG (a file) or RCLONE_CONFIG_<NAME>_*
    # variables; without a file, no config is read (and none is created).
    args = ["rclone", "--retries", "1", "--low-level-retries", "2", "--use-json-log",
            "--stats", "2s", "--stats-log-level", "NOTICE"]
    if not os.environ.get("RCLONE_CONFIG"):
        args += ["--config", "/dev/null"]
    return args


def run(t, args, what):
    """Runs rclone, stats lines as progress feedback; stdout on success."""
    p = subprocess.Popen(base_args() + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = p.stdout.read()
    errors = []
    for line in p.stderr:
        try:
            ev = json.loads(line)
        except ValueError:
            errors.append(line.strip())
            continue
        st = ev.get("stats")
        if st and st.get("totalBytes"):
            t.event("progress", "info", f"{st.get('bytes', 0)} of {st['totalBytes']} bytes")
        elif ev.get("level") == "error":
            errors.append(ev.get("msg", ""))
    p.wait()
    if p.returncode != 0:
        text = "; ".join(e for e in errors if e)[-600:] or f"rclone exited {p.returncode}"
        t.event(what, "error", f"rclone {args[0]} failed", text)
        t.finish(False, f"{what}: {text}", code=code_of(p.returncode, text), exit_code=p.returncode)
    return out


def code_of(rc, text):
    if "didn't find section in config file" in text or "couldn't decrypt password" in text or "401" in text or "403" in text:
        return "CONFIG_ERROR"  # the remote's configuration: a retry will not help
    if rc == 3 or "not found" in text:
        return "INVALID_INPUT"  # no such file or folder
    if rc == 5 or "connection refused" in text:
        return "DEPENDENCY_UNAVAILABLE"  # the storage is not reachable now
    return "TOOL_FAILURE"


def remote_path(remote, path):
    return remote + ":" + path.lstrip("/")
