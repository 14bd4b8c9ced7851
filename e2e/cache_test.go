package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/wfapi"
)

// stampTool writes the test tool `stamp` into a project: idempotent, it
// writes a random token into a file of its step folder (its output names
// the file, `format: path`) and, given `read`, outputs that file's text.
// It returns the tool's folder (removed at the test's end).
func stampTool(t testing.TB, project string) string {
	t.Helper()
	dir := filepath.Join(project, "tools", "stamp")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	manifest := `name: stamp
version: 1.0.0
description: Writes a random token into a file; reads a file back
capabilities: [test.stamp]
input_schema:
  type: object
  properties:
    text: {type: string}
    src: {type: string, format: path}
    read: {type: string, format: path}
output_schema:
  type: object
  required: [token, file]
  properties:
    token: {type: string}
    file: {type: string, format: path}
    read: {type: string}
entrypoint: {type: command, command: [./run.sh]}
idempotent: true
`
	run := `#!/bin/sh
in=$(cat "$CAPFLOW_INPUT_PATH")
read=$(printf '%s' "$in" | sed -n 's/.*"read":"\([^"]*\)".*/\1/p')
got=""
[ -n "$read" ] && got=$(cat "$read")
tok=$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
echo "$tok" > "$CAPFLOW_WORKDIR/token.txt"
printf '{"toolId":"stamp","exitCode":0,"success":true,"timestamp":"2026-01-01T00:00:00Z","message":"stamped","feedback":[],"data":{"token":"%s","file":"%s/token.txt","read":"%s"}}' "$tok" "$CAPFLOW_WORKDIR" "$got" > "$CAPFLOW_OUTPUT_PATH"
`
	if err := os.WriteFile(filepath.Join(dir, "tool.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte(run), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// stampOf returns a run's step: its token, the file's text, its cached_from.
func stampOf(t *testing.T, res runResult, id string) (token, file, from string) {
	t.Helper()
	s := res.step(t, id)
	d, _ := s.Envelope.Data.(map[string]any)
	path, _ := d["file"].(string)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("step %s: its file: %v", id, err)
	}
	tok, _ := d["token"].(string)
	if strings.TrimSpace(string(b)) != tok {
		t.Fatalf("step %s: the file %s holds %q, the data says %q", id, path, b, tok)
	}
	return tok, path, s.CachedFrom
}

// The cache: a second run of the same tool and inputs reuses the first's
// output and file (no tool ran); a changed input byte, input file or tool
// misses; a ttl runs out; purge empties it.
func TestCacheHitsAndMisses(t *testing.T) {
	stampTool(t, h.project)
	src := filepath.Join(h.project, "logs", "cache-src.txt")
	_ = os.MkdirAll(filepath.Dir(src), 0o755)
	if err := os.WriteFile(src, []byte("v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.capflow(t, "cache", "purge")
	plan := func(text, ttl string) string {
		return h.writePlan(t, "cached", `name: cached
steps:
  - {id: a, capability: test.stamp, with: {text: "`+text+`", src: "`+src+`"}, cache: {ttl: `+ttl+`}}
`)
	}
	run := func() runResult {
		t.Helper()
		code, res := h.run(t, plan("hello", "1h"))
		if code != 0 || res.Status != "passed" {
			t.Fatalf("exit %d %s: %s", code, res.Status, res.Message)
		}
		return res
	}
	first := run()
	tok1, file1, from := stampOf(t, first, "a")
	if from != "" {
		t.Fatalf("the first run came from the cache (%s)", from)
	}
	second := run()
	tok2, file2, from := stampOf(t, second, "a")
	if from != first.WorkflowID || tok2 != tok1 || file2 == file1 || !strings.Contains(file2, second.WorkflowID) {
		t.Fatalf("second run: cached_from %q (want %s), token %s (want %s), file %s", from, first.WorkflowID, tok2, tok1, file2)
	}
	md, _ := os.ReadFile(second.Report.Markdown)
	if !strings.Contains(string(md), "cached result of `"+first.WorkflowID+"`") {
		t.Fatalf("the report does not say where the result came from:\n%s", md)
	}
	// A changed input file misses, and its result is then the one reused.
	if err := os.WriteFile(src, []byte("v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	third := run()
	if tok, _, from := stampOf(t, third, "a"); from != "" || tok == tok1 {
		t.Fatalf("a changed input file hit the cache (%s)", from)
	}
	if _, _, from := stampOf(t, run(), "a"); from != third.WorkflowID {
		t.Fatalf("after the miss: cached_from %q, want %s", from, third.WorkflowID)
	}
	// A changed input byte misses.
	code, res := h.run(t, plan("hellO", "1h"))
	if _, _, from := stampOf(t, res, "a"); code != 0 || from != "" {
		t.Fatalf("a changed input hit the cache (%s)", from)
	}
	// A changed tool (its script) misses.
	script := filepath.Join(h.project, "tools", "stamp", "run.sh")
	b, _ := os.ReadFile(script)
	if err := os.WriteFile(script, append(b, []byte("# changed\n")...), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, from := stampOf(t, run(), "a"); from != "" {
		t.Fatalf("a changed tool hit the cache (%s)", from)
	}
	// A ttl shorter than the entry's age misses, saying why.
	time.Sleep(2 * time.Second)
	_, res = h.run(t, plan("hello", "1s"))
	s := res.step(t, "a")
	if s.CachedFrom != "" || !feedbackHas(s, "past the step's ttl 1s") {
		t.Fatalf("an entry past the ttl was used (%s): %+v", s.CachedFrom, s.Envelope.Feedback)
	}
	cacheCount(t, 4)
	code, e, _ := h.capflow(t, "cache", "purge", "--older-than", "1h")
	if code != 0 || !strings.Contains(e.Message, "purged 0 ") {
		t.Fatalf("purge --older-than 1h: exit %d %s", code, e.Message)
	}
	code, e, _ = h.capflow(t, "cache", "purge")
	if code != 0 || !strings.Contains(e.Message, "purged 4 ") {
		t.Fatalf("purge: exit %d %s", code, e.Message)
	}
	cacheCount(t, 0)
	if _, _, from := stampOf(t, run(), "a"); from != "" {
		t.Fatalf("a purged cache hit (%s)", from)
	}
}

func feedbackHas(s wfapi.StepResult, text string) bool {
	for _, f := range s.Envelope.Feedback {
		if strings.Contains(f.Message, text) {
			return true
		}
	}
	return false
}

// cacheCount checks `capflow cache ls`.
func cacheCount(t *testing.T, want int) {
	t.Helper()
	code, e, stderr := h.capflow(t, "cache", "ls")
	var out struct {
		Entries []struct {
			Key  string `json:"key"`
			Tool string `json:"tool"`
		} `json:"entries"`
	}
	data(t, e, &out)
	if code != 0 || len(out.Entries) != want {
		t.Fatalf("cache ls: exit %d, %d entries, want %d\n%s", code, len(out.Entries), want, stderr)
	}
	for _, en := range out.Entries {
		if code, e, _ := h.capflow(t, "cache", "show", en.Key[:10]); code != 0 || !strings.Contains(e.Message, "stamp@1.0.0") {
			t.Fatalf("cache show %s: exit %d %s", en.Key[:10], code, e.Message)
		}
	}
}

// Runs computing the same key at once both pass, and leave one whole
// entry, which the next run uses.
func TestCacheConcurrentWriters(t *testing.T) {
	stampTool(t, h.project)
	plan := h.writePlan(t, "cached-race", `name: cached-race
steps:
  - {id: a, capability: test.stamp, with: {text: "race `+time.Now().Format(time.RFC3339Nano)+`"}, cache: true}
`)
	var wg sync.WaitGroup
	tokens := make([]string, 4)
	for i := range tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, res := h.run(t, plan)
			if code != 0 {
				t.Errorf("run %d: exit %d %s", i, code, res.Message)
				return
			}
			tokens[i] = res.step(t, "a").Envelope.Data.(map[string]any)["token"].(string)
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	_, res := h.run(t, plan)
	tok, _, from := stampOf(t, res, "a")
	if from == "" || !strings.Contains(strings.Join(tokens, " "), tok) {
		t.Fatalf("after the race: cached_from %q, token %s, the racers' %v", from, tok, tokens)
	}
}
