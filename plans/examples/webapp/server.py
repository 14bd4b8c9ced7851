"""The demo web app of plans/examples/validate-webapp.yaml: serves this
folder on 127.0.0.1:PORT and logs every request; a missing file is logged
as an ERROR line, which logs.collect reports as an issue."""
import http.server
import os
import sys

port = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("PORT", "8080"))
root = os.path.dirname(os.path.abspath(__file__))


class Handler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, directory=root, **kwargs)

    def log_message(self, fmt, *args):
        print("%s %s" % (self.address_string(), fmt % args), flush=True)

    def send_error(self, code, message=None, explain=None):
        if code == 404:
            print("ERROR not found: %s" % self.path, flush=True)
        super().send_error(code, message, explain)


print("demo app listening on 127.0.0.1:%d" % port, flush=True)
http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
