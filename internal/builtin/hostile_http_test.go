package builtin

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/egress"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/wire"
)

// TestHTTPRequestIsMarked: every request of http.request carries
// wire.PlanStepHeader, which a plan can neither set nor remove (the
// hostile audit's H5: a plan's step approved another run's gate through
// the console, which refuses requests that carry it).
func TestHTTPRequestIsMarked(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get(wire.PlanStepHeader)
	}))
	defer srv.Close()
	if _, err := call(t, "http.request", t.TempDir(), map[string]any{"url": srv.URL}); err != nil {
		t.Fatal(err)
	}
	if h := <-got; h == "" {
		t.Fatal("the request does not carry " + wire.PlanStepHeader)
	}
	for _, name := range []string{wire.PlanStepHeader, strings.ToLower(wire.PlanStepHeader)} {
		_, err := call(t, "http.request", t.TempDir(), map[string]any{"url": srv.URL, "headers": map[string]any{name: ""}})
		if caperr.CodeOf(err) != caperr.InvalidInput {
			t.Fatalf("a plan setting %s: %v", name, err)
		}
	}
}

// TestHTTPRequestReachesOnlyWhatItWasGiven: a plan's http.request reaches
// no loopback, private or metadata address, not even through a redirect
// or a name that resolves to one, unless the policy's network.allow names
// it (hostile findings at 6003afe, 1: a plan drove Temporal's HTTP API).
func TestHTTPRequestReachesOnlyWhatItWasGiven(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("inner")) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	public := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, srv.URL+"/api/v1/namespaces/default/workflows", http.StatusFound)
	}))
	defer public.Close()
	bare := func() *Env { return &Env{Root: t.TempDir(), Feedback: envelope.NewBuilder("http.request")} }
	for _, url := range []string{srv.URL, "http://localhost:" + port + "/", "http://[::ffff:127.0.0.1]:" + port + "/",
		"http://169.254.169.254/latest/meta-data/", "http://10.0.0.1:1/"} {
		_, err := callIn("http.request", bare(), map[string]any{"url": url, "timeout_ms": int64(2000)})
		if caperr.CodeOf(err) != caperr.PolicyBlocked || !strings.Contains(err.Error(), "network.allow") {
			t.Errorf("%s: %v", url, err)
		}
	}
	// Allowed to reach the first server only: its redirect to the other
	// loopback server is refused on the redirect's own connection.
	own, _ := egress.ParseEntry(strings.TrimPrefix(public.URL, "http://"))
	env := bare()
	env.Net = &egress.Rules{Allow: []egress.Entry{own}}
	if _, err := callIn("http.request", env, map[string]any{"url": public.URL}); caperr.CodeOf(err) != caperr.PolicyBlocked {
		t.Fatalf("the redirect to loopback: %v", err)
	}
	lo, _ := egress.ParseEntry("127.0.0.1:" + port)
	env.Net = &egress.Rules{Allow: []egress.Entry{lo}}
	if got, err := callIn("http.request", env, map[string]any{"url": srv.URL}); err != nil || got["body"] != "inner" {
		t.Fatalf("allowed: %v %v", got, err)
	}
}
