package builtin

import (
	"archive/zip"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/egress"
	"github.com/capflow/capflow/internal/envelope"
)

func call(t *testing.T, name string, root string, in map[string]any) (map[string]any, error) {
	t.Helper()
	if _, ok := Lookup(name); !ok {
		t.Fatalf("builtin %s not registered", name)
	}
	// The tests' servers are on this machine's loopback, which a run
	// reaches only where its policy allows it (TestHTTPRequestReachesOnlyWhatItWasGiven).
	lo, _ := egress.ParseEntry("127.0.0.1")
	return callIn(name, &Env{Root: root, Feedback: envelope.NewBuilder(name), Net: &egress.Rules{Allow: []egress.Entry{lo}}}, in)
}

func callIn(name string, env *Env, in map[string]any) (map[string]any, error) {
	f, _ := Lookup(name)
	out, err := f(context.Background(), in, env)
	m, _ := out.(map[string]any)
	return m, err
}

func TestFiles(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if _, err := call(t, "file.write", root, map[string]any{"path": "out/a.txt", "content": "hello"}); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, "file.write", root, map[string]any{"path": "out/a.txt", "content": " world", "append": true}); err != nil {
		t.Fatal(err)
	}
	got, err := call(t, "file.read", root, map[string]any{"path": "out/a.txt"})
	if err != nil || got["content"] != "hello world" || got["truncated"] != false {
		t.Fatalf("read: %v %v", got, err)
	}
	got, _ = call(t, "file.read", root, map[string]any{"path": "out/a.txt", "max_bytes": int64(5), "encoding": "base64"})
	if got["content"] != "aGVsbG8=" || got["truncated"] != true {
		t.Fatalf("read capped/base64: %v", got)
	}
	got, _ = call(t, "file.checksum", root, map[string]any{"path": "out/a.txt"})
	if got["sha256"] != "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9" {
		t.Fatalf("checksum: %v", got)
	}
	call(t, "file.write", root, map[string]any{"path": "out/sub/b.md", "content": "x"})
	got, _ = call(t, "file.list", root, map[string]any{"dir": "out", "pattern": "*.txt", "recursive": true})
	if got["count"] != 1 {
		t.Fatalf("list: %v", got)
	}
	got, _ = call(t, "file.list", root, map[string]any{"dir": "out", "recursive": true})
	if got["count"] != 2 {
		t.Fatalf("list all: %v", got)
	}
	for _, p := range []string{"../escape.txt", "/etc/passwd"} {
		if _, err := call(t, "file.read", root, map[string]any{"path": p}); caperr.CodeOf(err) != caperr.InvalidInput {
			t.Fatalf("%s not refused: %v", p, err)
		}
	}
	if _, err := call(t, "file.read", root, map[string]any{"path": "missing"}); caperr.CodeOf(err) != caperr.InvalidInput {
		t.Fatalf("missing file: %v", err)
	}
}

func TestArchives(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"zip", "tar.gz"} {
		root := t.TempDir()
		os.MkdirAll(filepath.Join(root, "src/deep"), 0o755)
		os.WriteFile(filepath.Join(root, "src/a.txt"), []byte("A"), 0o644)
		os.WriteFile(filepath.Join(root, "src/deep/b.txt"), []byte("BB"), 0o644)
		out, err := call(t, "archive.create", root, map[string]any{"source": "src", "output": "build/out." + format})
		if err != nil || out["count"] != 2 {
			t.Fatalf("%s create: %v %v", format, out, err)
		}
		got, err := call(t, "archive.extract", root, map[string]any{"archive": "build/out." + format, "dest": "x"})
		if err != nil || got["count"] != 2 || got["bytes"] != int64(3) {
			t.Fatalf("%s extract: %v %v", format, got, err)
		}
		if b, _ := os.ReadFile(filepath.Join(root, "x/deep/b.txt")); string(b) != "BB" {
			t.Fatalf("%s round trip lost content", format)
		}
	}
	// zip slip
	root := t.TempDir()
	f, _ := os.Create(filepath.Join(root, "evil.zip"))
	zw := zip.NewWriter(f)
	w, _ := zw.Create("../../evil.txt")
	w.Write([]byte("x"))
	zw.Close()
	f.Close()
	_, err := call(t, "archive.extract", root, map[string]any{"archive": "evil.zip", "dest": "x"})
	if caperr.CodeOf(err) != caperr.InvalidInput || !strings.Contains(err.Error(), "outside") {
		t.Fatalf("zip slip not refused: %v", err)
	}
	if _, err := call(t, "archive.create", root, map[string]any{"source": "evil.zip", "output": "x.rar"}); caperr.CodeOf(err) != caperr.InvalidInput {
		t.Fatalf("unknown format: %v", err)
	}
}

func TestHTTPRequest(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/fail":
			w.WriteHeader(503)
			return
		case "/slow-headers":
			time.Sleep(2 * time.Second)
		case "/slow-body":
			w.Write([]byte("start"))
			w.(http.Flusher).Flush()
			time.Sleep(2 * time.Second)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"method":"` + r.Method + `","auth":"` + r.Header.Get("X-Key") + `"}`))
	}))
	defer srv.Close()
	got, err := call(t, "http.request", "", map[string]any{"url": srv.URL + "/ok", "method": "POST", "headers": map[string]any{"X-Key": "k"}, "json": map[string]any{"a": 1}})
	if err != nil || got["status"] != 200 || got["json"].(map[string]any)["auth"] != "k" {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := call(t, "http.request", "", map[string]any{"url": srv.URL + "/fail"}); caperr.CodeOf(err) != caperr.DependencyUnavailable {
		t.Fatalf("503: %v", err)
	}
	if _, err := call(t, "http.request", "", map[string]any{"url": srv.URL + "/ok", "expect_status": int64(201)}); caperr.CodeOf(err) != caperr.ToolFailure {
		t.Fatalf("expect_status: %v", err)
	}
	// timeout_ms is TASK_TIMEOUT, before the headers or during the body.
	for _, p := range []string{"/slow-headers", "/slow-body"} {
		_, err := call(t, "http.request", "", map[string]any{"url": srv.URL + p, "timeout_ms": int64(200)})
		if caperr.CodeOf(err) != caperr.TaskTimeout || !strings.Contains(err.Error(), "timeout_ms") {
			t.Errorf("%s: %v", p, err)
		}
	}
	// A CR or LF in a header is the input's fault, refused before sending.
	for _, h := range []map[string]any{{"X-A": "v\r\nX-Injected: 1"}, {"X A": "v"}, {"X-A": "v\nb"}} {
		if _, err := call(t, "http.request", "", map[string]any{"url": srv.URL + "/ok", "headers": h}); caperr.CodeOf(err) != caperr.InvalidInput {
			t.Errorf("header %q: %v", h, err)
		}
	}
}

func TestJSONQueryAndTemplate(t *testing.T) {
	t.Parallel()
	got, err := call(t, "json.query", "", map[string]any{"query": ".items[] | select(.n > 1) | .name", "input": map[string]any{"items": []any{
		map[string]any{"name": "a", "n": int64(1)}, map[string]any{"name": "b", "n": uint64(2)}, map[string]any{"name": "c", "n": 3.5}}}})
	if err != nil || got["count"] != 2 || got["result"] != "b" {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := call(t, "json.query", "", map[string]any{"query": ".[", "input": 1}); caperr.CodeOf(err) != caperr.InvalidInput {
		t.Fatalf("bad query: %v", err)
	}
	root := t.TempDir()
	got, err = call(t, "text.render", root, map[string]any{"template": "Hi {{.name | upper}} ({{join \", \" .tags}})", "values": map[string]any{"name": "ada", "tags": []any{"x", "y"}}, "output_path": "r.txt"})
	if err != nil || got["text"] != "Hi ADA (x, y)" {
		t.Fatalf("%v %v", got, err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "r.txt")); string(b) != "Hi ADA (x, y)" {
		t.Fatal("render did not write the file")
	}
	if _, err := call(t, "text.render", "", map[string]any{"template": "{{.missing}}"}); caperr.CodeOf(err) != caperr.InvalidInput {
		t.Fatalf("missing key: %v", err)
	}
}

func TestEveryCoreManifestHasABuiltin(t *testing.T) {
	t.Parallel()
	entries, _ := os.ReadDir("../../kits/core")
	n := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("../../kits/core", e.Name(), "tool.yaml"))
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "entrypoint: {type: builtin, name: ") {
				name := strings.TrimSuffix(strings.TrimPrefix(line, "entrypoint: {type: builtin, name: "), "}")
				if _, ok := Lookup(name); !ok {
					t.Errorf("%s names builtin %q, which is not registered", e.Name(), name)
				}
				n++
			}
		}
	}
	if n < 8 {
		t.Fatalf("core kit has %d builtin tools, want at least 8", n)
	}
}

// A builtin's traits are what it declared at registration.
func TestTraitsAreDeclared(t *testing.T) {
	for name, want := range map[string]Traits{
		"flow.approve": {WaitsForPerson: true},
		"json.query":   {},
		"file.read":    {},
		"no.such":      {},
	} {
		if got := TraitsOf(name); got != want {
			t.Errorf("%s: traits %+v, want %+v", name, got, want)
		}
	}
}
