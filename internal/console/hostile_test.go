package console

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/project"
	"github.com/capflow/capflow/internal/runfolder"
)

// hostileReq sends one request to ts with Host and headers set as an
// attacker would.
func hostileReq(t *testing.T, ts *httptest.Server, method, path, host, body string, header ...string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	c := *ts.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// TestHostileRequests: the hostile audit's H5 and L3-L6. With or without
// a token, a foreign Host (DNS rebinding), a foreign Origin, a cross-site
// fetch, a plan's http.request and a control request that is not JSON
// with the page's CSRF token are refused 403.
func TestHostileRequests(t *testing.T) {
	for _, token := range []string{"", "s3cret"} {
		ts := testServer(t, token)
		u, _ := url.Parse(ts.URL)
		port := u.Port()
		auth := []string{"Authorization", "Bearer " + token}
		if token == "" {
			auth = nil
		}
		csrf := ""
		if code, body, _ := hostileReq(t, ts, "GET", "/api/csrf", "", "", auth...); code == 200 {
			csrf = strings.Split(strings.Split(body, `"csrf":"`)[1], `"`)[0]
		}
		if len(csrf) != 48 {
			t.Fatalf("token %q: no CSRF token from /api/csrf", token)
		}
		for _, c := range []struct {
			name, method, path, host, body string
			header                         []string
			want                           int
		}{
			{"own address", "GET", "/api/plans", "", "", nil, 200},
			{"localhost", "GET", "/api/plans", "localhost:" + port, "", nil, 200},
			{"a rebinding name", "GET", "/api/plans", "evil.example:" + port, "", nil, 403},
			{"another port", "GET", "/api/plans", "127.0.0.1:1", "", nil, 403},
			{"no port", "GET", "/api/plans", "evil.example", "", nil, 403},
			{"a foreign origin", "GET", "/api/runs", "", "", []string{"Origin", "http://evil.example"}, 403},
			{"a null origin", "GET", "/api/plans", "", "", []string{"Origin", "null"}, 403},
			{"its own origin", "GET", "/api/plans", "", "", []string{"Origin", ts.URL}, 200},
			{"a cross-site fetch", "GET", "/api/plans", "", "", []string{"Sec-Fetch-Site", "cross-site"}, 403},
			{"a plan's http.request", "GET", "/api/plans", "", "", []string{client.PlanStepHeader, "run-1"}, 403},
			{"a text/plain decision", "POST", "/api/runs/r/decide", "", `{"step":"gate","action":"approve","by":"alice"}`,
				[]string{"Content-Type", "text/plain", CSRFHeader, csrf}, 403},
			{"JSON without the CSRF token", "POST", "/api/runs/r/decide", "", `{}`, []string{"Content-Type", "application/json"}, 403},
			{"JSON with a wrong CSRF token", "POST", "/api/runs/r/decide", "", `{}`, []string{"Content-Type", "application/json", CSRFHeader, "x"}, 403},
			// Past the guard: no POST route of that path.
			{"JSON with the CSRF token", "POST", "/api/plans", "", `{}`, []string{"Content-Type", "application/json; charset=utf-8", CSRFHeader, csrf}, 405},
		} {
			code, body, _ := hostileReq(t, ts, c.method, c.path, c.host, c.body, append(append([]string(nil), auth...), c.header...)...)
			if code != c.want {
				t.Errorf("token %q, %s: %d %s, want %d", token, c.name, code, body, c.want)
			}
		}
	}
	ts := testServer(t, "s3cret")
	// L3: the scheme is checked, not skipped.
	if code, _, _ := hostileReq(t, ts, "GET", "/api/plans", "", "", "Authorization", "XXXXXXXs3cret"); code != 401 {
		t.Errorf("a token after 7 unchecked bytes: %d", code)
	}
	// L4: the token link redirects to this console's path only.
	for path, want := range map[string]string{
		"//evil.example/x?token=s3cret&a=1": "/?a=1", "/%5Cevil.example?token=s3cret": "/", "/%09/evil.example?token=s3cret": "/",
		"/runs/r-1?token=s3cret": "/runs/r-1",
	} {
		code, _, h := hostileReq(t, ts, "GET", path, "", "")
		if loc := h.Get("Location"); code != 303 || loc != want {
			t.Errorf("%s: %d %q, want 303 %q", path, code, loc, want)
		}
	}
}

// TestAllowedHostBehindAProxy: a name given with --allow-host is the
// console's whatever port the proxy's Host carries; other names are not.
func TestAllowedHostBehindAProxy(t *testing.T) {
	_, root := testProject(t, "")
	proj, err := project.Load(project.Options{Dir: root})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Project: proj, Hosts: []string{"Console.Example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	for host, want := range map[string]int{"console.example.com": 200, "console.example.com:443": 200, "CONSOLE.example.com:8443": 200,
		"evil.example": 403, "console.example.com.evil.example": 403} {
		if code, body, _ := hostileReq(t, ts, "GET", "/api/plans", host, ""); code != want {
			t.Errorf("Host %s: %d %s, want %d", host, code, body, want)
		}
	}
}

// TestInputsStayInTheirRecords: the inputs the console shows are the
// step's records, which no tool writes: a tool's own input.json in its
// step folder (forged: hostile findings at 6003afe, 12a) is not shown, and
// a link in the records is not followed.
func TestInputsStayInTheirRecords(t *testing.T) {
	ts, root := testProject(t, "")
	secret := filepath.Join(t.TempDir(), "creds.json")
	os.WriteFile(secret, []byte(`{"aws_secret":"OUTSIDE_JSON_SECRET"}`), 0o600)
	runDir := filepath.Join(root, ".capflow", "runs", runfolder.Name("run1"))
	os.MkdirAll(runfolder.Step(runDir, "s", -1), 0o755)
	os.WriteFile(filepath.Join(runfolder.Step(runDir, "s", -1), "input.json"), []byte(`{"cmd":"echo nothing to see"}`), 0o644)
	if code, body := get(t, ts.Client(), ts.URL+"/api/runs/run1/steps/s/inputs"); code != 404 || strings.Contains(body, "nothing to see") {
		t.Fatalf("the tool's own file: %d %s", code, body)
	}
	step := runfolder.Records(runDir, "s", -1)
	os.MkdirAll(step, 0o755)
	os.Symlink(secret, filepath.Join(step, "input.json"))
	if code, body := get(t, ts.Client(), ts.URL+"/api/runs/run1/steps/s/inputs"); code != 404 || strings.Contains(body, "OUTSIDE_JSON_SECRET") {
		t.Fatalf("%d %s", code, body)
	}
	os.Remove(filepath.Join(step, "input.json"))
	os.WriteFile(filepath.Join(step, "input.json"), []byte(`{"a":1}`), 0o644)
	if code, body := get(t, ts.Client(), ts.URL+"/api/runs/run1/steps/s/inputs"); code != 200 || body != `{"a":1}` {
		t.Fatalf("the step's own inputs: %d %s", code, body)
	}
}

// TestRunFilter: ?status= and ?plan= never reach the query's syntax (L5).
func TestRunFilter(t *testing.T) {
	for _, c := range []struct{ status, plan, want string }{
		{"", "", ""},
		{"passed", "", "CapflowStatus = 'passed'"},
		{"failed", "nightly", "CapflowStatus = 'failed' AND CapflowPlan = 'nightly'"},
		{"running", "", "CapflowStatus = 'running' AND ExecutionStatus = 'Running'"},
		{"x\\", "y", "error"},
		{"", "y\\", "error"},
		{"", "a' OR 'b'='b", "error"},
	} {
		got, err := runFilter(c.status, c.plan)
		if err != nil {
			if caperr.CodeOf(err) != caperr.InvalidInput {
				t.Errorf("%q %q: %v", c.status, c.plan, err)
			}
			got = "error"
		}
		if got != c.want {
			t.Errorf("%q %q: %q, want %q", c.status, c.plan, got, c.want)
		}
	}
}

// TestPlansSkipWhatIsNoPlanFile: a FIFO named *.yaml hung /api/plans, and
// a 300 MB one cost its size a request (M5); each is passed over now, and
// so is a link out of the project.
func TestPlansSkipWhatIsNoPlanFile(t *testing.T) {
	ts, root := testProject(t, "")
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret.yaml"), []byte("steps: [SECRET]\n"), 0o644)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(syscall.Mkfifo(filepath.Join(root, "plans", "zz-fifo.yaml"), 0o644))
	must(os.Symlink(filepath.Join(outside, "secret.yaml"), filepath.Join(root, "plans", "link.yaml")))
	big := append([]byte("name: big\nsteps: []\n#"), bytes.Repeat([]byte("x"), 5<<20)...)
	must(os.WriteFile(filepath.Join(root, "plans", "huge.yaml"), big, 0o644))
	done := make(chan string, 1)
	go func() {
		_, body := get(t, ts.Client(), ts.URL+"/api/plans")
		done <- body
	}()
	select {
	case body := <-done:
		if body != "{\"plans\":[\"plans/gap.yaml\",\"plans/ok.yaml\"]}\n" {
			t.Fatalf("plans: %s", body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("GET /api/plans hung on a FIFO")
	}
	for _, f := range []string{"plans/link.yaml", "plans/zz-fifo.yaml", "plans/huge.yaml"} {
		if code, body := get(t, ts.Client(), ts.URL+"/api/plans/check?file="+f); code != 400 || strings.Contains(body, "SECRET") {
			t.Errorf("check %s: %d %s", f, code, body)
		}
	}
}

// TestTimelineStaysInTheRunFolder: a records folder (or its attempts
// file) left as a link out of the run's folder is not read for the
// timeline; the step's own record is, and a tool's forged attempts in its
// step folder (hostile findings at 6003afe, 12b) are not.
func TestTimelineStaysInTheRunFolder(t *testing.T) {
	runDir := t.TempDir()
	outside := t.TempDir()
	line := `{"attempt":1,"code":"TOOL_FAILURE","message":"OUTSIDE","started":"2026-01-01T00:00:00Z","ended":"2026-01-01T00:00:01Z"}` + "\n"
	os.WriteFile(filepath.Join(outside, ".capflow-attempts.jsonl"), []byte(line), 0o644)
	forged := runfolder.Step(runDir, "forged", -1)
	os.MkdirAll(forged, 0o755)
	os.WriteFile(filepath.Join(forged, ".capflow-attempts.jsonl"), []byte(strings.Replace(line, "OUTSIDE", "forged", 1)), 0o644)
	steps := filepath.Join(runDir, "records")
	os.MkdirAll(filepath.Join(steps, "own"), 0o755)
	os.Symlink(outside, filepath.Join(steps, "linked"))
	os.MkdirAll(filepath.Join(steps, "filelink"), 0o755)
	os.Symlink(filepath.Join(outside, ".capflow-attempts.jsonl"), filepath.Join(steps, "filelink", ".capflow-attempts.jsonl"))
	os.WriteFile(filepath.Join(steps, "own", ".capflow-attempts.jsonl"), []byte(strings.Replace(line, "OUTSIDE", "own", 1)), 0o644)
	for id, want := range map[string]string{"linked": "", "filelink": "", "own": "own", "forged": ""} {
		row := timelineStep(runDir, client.StepResult{ID: id, Status: "succeeded", Attempts: 2})
		got := ""
		if len(row.Failed) == 1 {
			got = row.Failed[0].Message
		}
		if got != want || len(row.Failed) > 1 {
			t.Errorf("%s: failed attempts %+v, want message %q", id, row.Failed, want)
		}
	}
}

// TestExpandNamesOnlyGroups: ?expand= keeps group and chain ids, each
// once, sorted, at most 32; anything else is dropped.
func TestExpandNamesOnlyGroups(t *testing.T) {
	var many []string
	for i := 1; i <= 40; i++ {
		many = append(many, "group:"+strconv.Itoa(i))
	}
	for q, want := range map[string]string{
		"group:2,chain:1,group:2":             "chain:1,group:2",
		"../../etc/passwd,group:0,step-x,g-1": "",
		"group:1%0a,group:1 ":                 "",
		strings.Join(many, ","):               strings.Join(slices.Sorted(slices.Values(many[:32])), ","),
	} {
		r := httptest.NewRequest("GET", "/api/runs/x/graph.svg?expand="+url.QueryEscape(q), nil)
		if got := strings.Join(expandParam(r), ","); got != want {
			t.Errorf("%q: %q, want %q", q, got, want)
		}
	}
}

// Only a plan's own groups open, MaxOpenedSteps steps at most: a request
// naming groups the plan does not have lays out nothing new.
func TestOpenableGroups(t *testing.T) {
	groups := map[string][]string{"group:1": make([]string, 3000), "group:2": make([]string, 3000), "chain:1": make([]string, 10)}
	for in, want := range map[string]string{
		"group:1,chain:1":         "group:1,chain:1",
		"group:1,group:2,chain:1": "group:1,chain:1",
		"group:9,chain:7":         "",
	} {
		if got := strings.Join(openable(strings.Split(in, ","), groups), ","); got != want {
			t.Errorf("%s: %q, want %q", in, got, want)
		}
	}
}

// TestEndedRunsKeptWithinABound: the ended runs the console keeps are
// bounded by their steps, the least recently asked let go first (hostile
// findings at 6003afe, 25).
func TestEndedRunsKeptWithinABound(t *testing.T) {
	c := newEndedCache(maxEndedSteps)
	big := &ended{states: make([]client.StepState, 40000)}
	small := &ended{states: make([]client.StepState, 10)}
	c.Store("big1", big)
	c.Store("small", small)
	if c.Len() != 2 {
		t.Fatal("a run within the bound was let go")
	}
	c.Store("big2", big)
	if _, ok := c.Load("big1"); ok || c.Len() != 2 {
		t.Fatalf("two 40,000-step runs kept: %d runs", c.Len())
	}
	if _, ok := c.Load("small"); !ok {
		t.Fatal("the small run, asked after big1, was let go first")
	}
	for i := range 1000 {
		c.Store(fmt.Sprint("r", i), small)
	}
	if c.Len()*11 > maxEndedSteps+11 {
		t.Fatalf("%d runs kept", c.Len())
	}
}

// TestLargeReportShownCut: a report past MaxReport is shown cut at a
// line's end with a note, not refused (hostile findings at 6003afe, 26).
func TestLargeReportShownCut(t *testing.T) {
	src := []byte(strings.Repeat("| step | ok |\n", 1000))
	out := string(cutReport(src, 100, "run-1"))
	if !strings.HasPrefix(out, "| step | ok |\n") || len(out) > 400 || !strings.Contains(out, "The report is 14000 bytes") || !strings.Contains(out, "capflow report run-1") {
		t.Fatalf("%q", out)
	}
	if string(cutReport(src, len(src), "x")) != string(src) {
		t.Fatal("a report within the bound was cut")
	}
}

// Every answer keeps the page to its own origin (Content-Security-Policy):
// a report's image or link to another host fetches nothing.
func TestPagesStayOnTheirOrigin(t *testing.T) {
	_, root := testProject(t, "")
	proj, err := project.Load(project.Options{Dir: root})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Project: proj})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	for _, path := range []string{"/", "/plans", "/runs/x", "/api/plans"} {
		u, _ := url.Parse(ts.URL)
		_, _, h := hostileReq(t, ts, "GET", path, u.Host, "")
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "img-src 'self' data:") || !strings.Contains(csp, "connect-src 'self'") {
			t.Errorf("%s: Content-Security-Policy %q", path, csp)
		}
	}
}
