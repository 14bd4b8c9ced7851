package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/egress"
)

// A real server process that misbehaves on purpose (e2e/testdata/mcp):
// each failure has its contract code, and the pool starts the server
// again after it died or hung.
func TestPoolAgainstAMisbehavingServer(t *testing.T) {
	script, _ := filepath.Abs("../../e2e/testdata/mcp/bad_server.py")
	p := New(Options{Servers: map[string]config.MCPServer{"bad": {Command: []string{"python3", script}}}, Root: t.TempDir()})
	defer p.Close()
	ctx := context.Background()
	call := func(tool string, timeout time.Duration) (string, error) {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		res, err := p.Call(cctx, "bad", tool, map[string]any{}, nil)
		if err != nil {
			return "", err
		}
		b, err := json.Marshal(res.StructuredContent)
		return string(b), err
	}
	tools, info, err := p.Tools(ctx, "bad")
	if err != nil || len(tools) != 6 || info.Name != "bad" {
		t.Fatalf("tools: %v %v %v", tools, info, err)
	}
	for _, c := range []struct {
		tool    string
		timeout time.Duration
		code    caperr.Code
	}{
		{"wrong", 10 * time.Second, caperr.ToolFailure},
		// A line cut short: at once, not at the timeout (M8).
		{"truncated", 10 * time.Second, caperr.ToolFailure},
		{"die", 10 * time.Second, caperr.DependencyUnavailable},
	} {
		start := time.Now()
		if _, err := call(c.tool, c.timeout); caperr.CodeOf(err) != c.code {
			t.Errorf("%s: %v, want %s", c.tool, err, c.code)
		}
		if took := time.Since(start); took > c.timeout/2 {
			t.Errorf("%s took %s", c.tool, took)
		}
	}
	// The server died: the next call starts it again.
	if out, err := call("ok", 10*time.Second); err != nil || out != `{"ok":true}` {
		t.Errorf("ok after the server died: %s %v", out, err)
	}
	if _, err := call("slow", 300*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow: %v", err)
	}
	if out, err := call("ok", 10*time.Second); err != nil || out != `{"ok":true}` {
		t.Errorf("ok after a hung call: %s %v", out, err)
	}
	if _, err := p.Call(ctx, "nope", "x", nil, nil); caperr.CodeOf(err) != caperr.DependencyUnavailable || !strings.Contains(err.Error(), "not configured") {
		t.Errorf("an unconfigured server: %v", err)
	}
}

// TestOneBadAnswerFailsOnlyItsCall: calls in flight on one session beside
// a call answered with a line cut short go on (hostile findings at
// 6003afe, 14).
func TestOneBadAnswerFailsOnlyItsCall(t *testing.T) {
	script, _ := filepath.Abs("../../e2e/testdata/mcp/bad_server.py")
	p := New(Options{Servers: map[string]config.MCPServer{"bad": {Command: []string{"python3", script}}}, Root: t.TempDir()})
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, _, err := p.Tools(ctx, "bad"); err != nil {
		t.Fatal(err)
	}
	tools := []string{"pause", "truncated", "ok", "pause"}
	errs := make([]error, len(tools))
	var wg sync.WaitGroup
	for i, tool := range tools {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = p.Call(ctx, "bad", tool, map[string]any{}, nil)
		}()
		time.Sleep(50 * time.Millisecond) // in this order
	}
	wg.Wait()
	for i, tool := range tools {
		if tool == "truncated" {
			if caperr.CodeOf(errs[i]) != caperr.ToolFailure || !strings.Contains(errs[i].Error(), "out of contract") {
				t.Errorf("truncated: %v", errs[i])
			}
		} else if errs[i] != nil {
			t.Errorf("%s beside it: %v", tool, errs[i])
		}
	}
}

func TestTailKeepsTheLastLines(t *testing.T) {
	tl := &tail{}
	for i := 0; i < 20; i++ {
		_, _ = tl.Write([]byte("line " + string(rune('a'+i)) + "\npart"))
		_, _ = tl.Write([]byte("ial\n"))
	}
	got := tl.String()
	if !strings.HasPrefix(got, "; its stderr ended: ") || strings.Count(got, "|") != tailLines-1 || !strings.HasSuffix(got, "partial") {
		t.Fatalf("%q", got)
	}
	tl.reset(nil)
	if tl.String() != "" {
		t.Fatal("reset kept lines")
	}
}

// TestHeadersStayWithTheirServer: a server's bearer token and headers go
// to its own origin only, never along a redirect to another host (M6).
func TestHeadersStayWithTheirServer(t *testing.T) {
	other := make(chan string, 4)
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		other <- r.Header.Get("Authorization") + "|" + r.Header.Get("X-Api-Key")
	}))
	defer elsewhere.Close()
	own := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		own <- r.Header.Get("Authorization")
		http.Redirect(w, r, elsewhere.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	lo, _ := egress.ParseEntry("127.0.0.1")
	p := New(Options{LookupEnv: func(k string) (string, bool) { return "bearer-secret", k == "TOKEN" },
		Net: func() *egress.Rules { return &egress.Rules{Allow: []egress.Entry{lo}} }})
	c := &http.Client{Transport: p.headers(config.MCPServer{URL: srv.URL + "/mcp", BearerTokenEnv: "TOKEN", Headers: map[string]string{"X-Api-Key": "k"}})}
	resp, err := c.Post(srv.URL+"/mcp", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := <-own; got != "Bearer bearer-secret" {
		t.Fatalf("its own server got %q", got)
	}
	if got := <-other; got != "|" {
		t.Fatalf("the host it redirected to got %q", got)
	}
}

// TestRedirectsStayUnderTheRules: the server's own address is the
// configuration's to declare; a redirect to a loopback address it does
// not allow is refused.
func TestRedirectsStayUnderTheRules(t *testing.T) {
	inner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("{}")) }))
	defer inner.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, inner.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	p := New(Options{})
	c := &http.Client{Transport: p.headers(config.MCPServer{URL: srv.URL + "/mcp"})}
	_, err := c.Post(srv.URL+"/mcp", "application/json", strings.NewReader("{}"))
	if _, ok := egress.AsRefused(err); !ok {
		t.Fatalf("the redirect to another loopback server: %v", err)
	}
}
