package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/project"
)

func TestCheckAddr(t *testing.T) {
	for _, c := range []struct {
		addr, token string
		ok          bool
	}{
		{"127.0.0.1:8080", "", true}, {"localhost:8080", "", true}, {"[::1]:8080", "", true},
		{"0.0.0.0:8080", "", false}, {":8080", "", false}, {"10.1.2.3:8080", "", false}, {"0.0.0.0:8080", "s3cret", true},
		{"nonsense", "", false},
	} {
		err := CheckAddr(c.addr, c.token)
		if (err == nil) != c.ok || (err != nil && caperr.CodeOf(err) != caperr.ConfigError) {
			t.Errorf("%s (token %q): %v", c.addr, c.token, err)
		}
	}
	if _, err := New(Options{Addr: "0.0.0.0:0"}); caperr.CodeOf(err) != caperr.ConfigError {
		t.Fatalf("a console open to the network without a token: %v", err)
	}
}

// testServer is a console over a project with one plan and one plan with
// a gap (no Temporal: the plan pages need none).
func testServer(t *testing.T, token string) *httptest.Server {
	t.Helper()
	ts, _ := testProject(t, token)
	return ts
}

// testProject is testServer and its project's root.
func testProject(t *testing.T, token string) (*httptest.Server, string) {
	t.Helper()
	root := t.TempDir()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "plans"), 0o755))
	must(os.WriteFile(filepath.Join(root, "plans", "ok.yaml"), []byte("name: ok\nsteps:\n  - {id: a, capability: text.render, with: {template: hi}}\n  - {id: b, capability: text.render, with: {template: \"${steps.a.data.text}\"}}\n"), 0o644))
	must(os.WriteFile(filepath.Join(root, "plans", "gap.yaml"), []byte("name: gap\nsteps:\n  - {id: up, capability: drive.upload}\n"), 0o644))
	must(os.WriteFile(filepath.Join(root, "notaplan.yaml"), []byte("a: 1\n"), 0o644))
	// A folder with its own capflow.yaml is another project: its plans are
	// not this one's.
	must(os.MkdirAll(filepath.Join(root, "bench", "other", "plans"), 0o755))
	must(os.WriteFile(filepath.Join(root, "bench", "other", "capflow.yaml"), []byte("{}\n"), 0o644))
	must(os.WriteFile(filepath.Join(root, "bench", "other", "plans", "theirs.yaml"), []byte("name: theirs\nsteps:\n  - {id: a, capability: text.render, with: {template: hi}}\n"), 0o644))
	proj, err := project.Load(project.Options{Dir: root})
	must(err)
	s, err := New(Options{Token: token, Project: proj})
	must(err)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts, root
}

func get(t *testing.T, c *http.Client, url string, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if len(header) == 2 {
		req.Header.Set(header[0], header[1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 1<<16)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String()
}

func TestPlansPages(t *testing.T) {
	ts := testServer(t, "")
	c := ts.Client()
	if code, body := get(t, c, ts.URL+"/api/plans"); code != 200 || body != "{\"plans\":[\"plans/gap.yaml\",\"plans/ok.yaml\"]}\n" {
		t.Fatalf("plans: %d %s", code, body)
	}
	if code, body := get(t, c, ts.URL+"/api/plans/check?file=plans/ok.yaml"); code != 200 || !strings.Contains(body, `"status":"ready"`) {
		t.Fatalf("check ok: %d %s", code, body)
	}
	if code, body := get(t, c, ts.URL+"/api/plans/check?file=plans/gap.yaml"); code != 200 || !strings.Contains(body, `"status":"partial-complete"`) || !strings.Contains(body, `"step_id":"up"`) {
		t.Fatalf("check gap: %d %s", code, body)
	}
	if code, body := get(t, c, ts.URL+"/api/plans/graph.svg?file=plans/ok.yaml"); code != 200 || !strings.Contains(body, `id="step&#45;b"`) || !strings.Contains(body, "edge&#45;solid") {
		t.Fatalf("graph: %d %.300s", code, body)
	}
	for _, bad := range []string{"../../etc/passwd", "/etc/passwd", "notaplan.yaml", ""} {
		if code, body := get(t, c, ts.URL+"/api/plans/check?file="+bad); code != 400 || !strings.Contains(body, "INVALID_INPUT") {
			t.Fatalf("check %q: %d %s", bad, code, body)
		}
	}
	for _, page := range []string{"/", "/runs/x", "/plans", "/assets/app.js", "/assets/style.css"} {
		if code, _ := get(t, c, ts.URL+page); code != 200 {
			t.Fatalf("%s: %d", page, code)
		}
	}
}

// With a token, every page and call needs it: a header, or a link with
// ?token= that leaves a cookie.
func TestTokenGuardsEverything(t *testing.T) {
	ts := testServer(t, "s3cret")
	c := ts.Client()
	for _, p := range []string{"/", "/api/plans", "/api/runs", "/assets/app.js"} {
		if code, body := get(t, c, ts.URL+p); code != 401 || !strings.Contains(body, "token") {
			t.Fatalf("%s without the token: %d %s", p, code, body)
		}
	}
	// A browser gets a page saying how to open the console, never the
	// token.
	req, _ := http.NewRequest("GET", ts.URL+"/runs/x", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(page), "This console needs its token") ||
		!strings.Contains(string(page), "?token=") || strings.Contains(string(page), "s3cret") {
		t.Fatalf("the page without the token: %d %s", resp.StatusCode, page)
	}
	if code, _ := get(t, c, ts.URL+"/api/plans", "Authorization", "Bearer wrong"); code != 401 {
		t.Fatalf("a wrong token: %d", code)
	}
	if code, _ := get(t, c, ts.URL+"/api/plans", "Authorization", "Bearer s3cret"); code != 200 {
		t.Fatalf("the token as a header: %d", code)
	}
	jar := &cookieJar{}
	c.Jar = jar
	if code, _ := get(t, c, ts.URL+"/plans?token=s3cret"); code != 200 || len(jar.cookies) != 2 || jar.cookies[0].Name != cookieName || !jar.cookies[0].HttpOnly {
		t.Fatalf("a link with the token: %d %v", code, jar.cookies)
	}
	if code, _ := get(t, c, ts.URL+"/api/plans"); code != 200 {
		t.Fatalf("the cookie the link left: %d", code)
	}
}

type cookieJar struct{ cookies []*http.Cookie }

func (j *cookieJar) SetCookies(_ *url.URL, cs []*http.Cookie) { j.cookies = append(j.cookies, cs...) }
func (j *cookieJar) Cookies(*url.URL) []*http.Cookie          { return j.cookies }
