package runtimekit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/egress"

	"github.com/capflow/capflow/internal/builtin"
)

// The log is read from where the last look stopped, a line at most 1 MiB
// is kept, and a log past 64 MiB with no match ends the probe.
func TestLogWatchIsIncremental(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server.log")
	w := &logWatch{path: path, re: regexp.MustCompile(`listening on (\d+)`)}
	if _, ok, err := w.look(); ok || err != nil {
		t.Fatalf("no log yet: %v %v", ok, err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, _ = f.WriteString("starting\n" + strings.Repeat("x", 3<<20)) // a long line, not ended
	if _, ok, _ := w.look(); ok || w.offset != int64(9+3<<20) || len(w.partial) != maxPartial {
		t.Fatalf("offset %d, partial %d", w.offset, len(w.partial))
	}
	_, _ = f.WriteString("\nlistening on 8080\n")
	line, ok, err := w.look()
	if !ok || err != nil || line != "listening on 8080" {
		t.Fatalf("%q %v %v", line, ok, err)
	}
	big := filepath.Join(t.TempDir(), "big.log")
	g, _ := os.Create(big)
	_ = g.Truncate(maxLogBytes + 1) // sparse: 64 MiB of NULs, no newline
	g.Close()
	w = &logWatch{path: big, re: regexp.MustCompile(`ready`)}
	if _, _, err := w.look(); err != errLogTooLong {
		t.Fatalf("want errLogTooLong, got %v", err)
	}
}

// A redirect to another host is not followed: that host's answer says
// nothing of this server. The evidence names what was asked and answered.
func TestHTTPProbeStaysOnItsHost(t *testing.T) {
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			http.Redirect(w, r, "/health", http.StatusFound)
		case "/health":
			http.Redirect(w, r, other.URL+"/elsewhere", http.StatusFound)
		}
	}))
	defer srv.Close()
	r := Record{Name: "web", PID: os.Getpid(), Readiness: &Readiness{Type: "http", Target: srv.URL + "/", Timeout: "1s"}}
	lo, _ := egress.ParseEntry("127.0.0.1")
	data, err := probe(context.Background(), r, nil, &egress.Rules{Allow: []egress.Entry{lo}})
	if err != nil {
		t.Fatal(err)
	}
	ev := data["probe_evidence"].([]string)
	want := "GET " + srv.URL + "/health → 302 (redirect to " + other.URL + "/elsewhere not followed: another host)"
	if len(ev) != 1 || ev[0] != want {
		t.Fatalf("evidence %q, want %q", ev, want)
	}
}

// server.start declares that it starts processes (the policy's sandbox
// applies to it); the other runtime builtins start none.
func TestServerStartDeclaresProcesses(t *testing.T) {
	for name, want := range map[string]bool{"server.start": true, "server.stop": false, "browser.run": false, "logs.collect": false} {
		if got := builtin.TraitsOf(name).StartsProcesses; got != want {
			t.Errorf("%s starts processes: %v, want %v", name, got, want)
		}
	}
}
