#!/usr/bin/env python3
"""An MCP server on stdio that misbehaves on purpose (e2e/mcp_test.go):
tools/call of "wrong" answers a result that is not a CallToolResult, of
"truncated" answers a JSON line cut short, of "die" exits mid-call, of
"slow" sleeps; everything else is by the book."""
import json
import sys
import time

TOOLS = [{"name": n, "description": d, "inputSchema": {"type": "object"}} for n, d in
         [("wrong", "answers out of contract"), ("truncated", "answers a line cut short"), ("die", "exits mid-call"),
          ("slow", "never answers"), ("pause", "answers {ok: true} after 0.3 s"),
          ("ok", "answers {ok: true}")]]


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    req = json.loads(line)
    rid, method = req.get("id"), req.get("method")
    if rid is None:
        continue  # a notification
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": req["params"]["protocolVersion"],
              "capabilities": {"tools": {}}, "serverInfo": {"name": "bad", "version": "0.1.0"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        name = req["params"]["name"]
        if name == "wrong":
            send({"jsonrpc": "2.0", "id": rid, "result": {"content": "not a list", "isError": "maybe"}})
        elif name == "truncated":
            sys.stdout.write('{"jsonrpc":"2.0","id":%s,"result":{"content":[' % json.dumps(rid) + "\n")
            sys.stdout.flush()
        elif name == "die":
            sys.exit(3)
        elif name == "slow":
            time.sleep(3600)
        elif name == "pause":
            time.sleep(0.3)
            send({"jsonrpc": "2.0", "id": rid, "result": {"content": [], "structuredContent": {"ok": True}}})
        else:
            send({"jsonrpc": "2.0", "id": rid, "result": {"content": [], "structuredContent": {"ok": True}}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})
