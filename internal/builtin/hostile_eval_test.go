package builtin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
)

func TestBoundedEvaluation(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	must(t, syscall.Mkfifo(filepath.Join(root, "fifo"), 0o600))
	must(t, syscall.Mkfifo(filepath.Join(root, "fifo.zip"), 0o600))
	cases := []struct {
		tool string
		in   map[string]any
		code caperr.Code
		want string
	}{
		{"text.render", map[string]any{"template": "{{range 1e14}}{{end}}"}, caperr.InvalidInput, "at most 10000"},
		{"text.render", map[string]any{"template": "{{range 5000}}{{range 5000}}x{{end}}{{end}}"}, caperr.InvalidInput, "nested ranges"},
		{"text.render", map[string]any{"template": "{{range .n}}{{end}}", "values": map[string]any{"n": int64(1e14)}}, caperr.InvalidInput, "range can't iterate"},
		// The output bound, or (on a loaded machine) the child's memory first.
		{"text.render", map[string]any{"template": "{{range 10000}}{{range 100}}0123456789{{end}}{{end}}"}, caperr.InvalidInput + "|" + caperr.ResourceExhausted, "larger than|memory limit"},
		{"json.query", map[string]any{"query": "def f: [f]; f", "input": 1}, caperr.ResourceExhausted, "memory limit"},
		{"json.query", map[string]any{"query": "[range(1e10)]", "input": 1}, caperr.ResourceExhausted, "memory limit"},
		// One allocation each, too large for any sampling watchdog.
		{"json.query", map[string]any{"query": `("x" * 1000000000) | length`, "input": 1}, caperr.ResourceExhausted, "memory limit"},
		{"json.query", map[string]any{"query": `.[400000000] = 1`, "input": []any{}}, caperr.ResourceExhausted, "memory limit"},
		{"json.query", map[string]any{"query": `"x" * 30000000 | explode | length`, "input": 1}, caperr.ResourceExhausted, "memory limit"},
		{"file.read", map[string]any{"path": "x", "max_bytes": int64(9223372036854775807)}, caperr.InvalidInput, "max_bytes"},
		{"file.read", map[string]any{"path": "fifo"}, caperr.InvalidInput, "not a regular file"},
		{"file.checksum", map[string]any{"path": "fifo"}, caperr.InvalidInput, "not a regular file"},
		{"file.write", map[string]any{"path": "fifo", "content": "x", "append": true}, caperr.InvalidInput, "not a regular file"},
		{"json.query", map[string]any{"path": "fifo", "query": "."}, caperr.InvalidInput, "not a regular file"},
		{"archive.extract", map[string]any{"archive": "fifo.zip", "dest": "out-fifo"}, caperr.InvalidInput, "not a regular file"},
	}
	for _, c := range cases {
		start := time.Now()
		_, err := call(t, c.tool, root, c.in)
		if !containsAny(string(caperr.CodeOf(err)), strings.Split(string(c.code), "|")) || !containsAny(err.Error(), strings.Split(c.want, "|")) {
			t.Errorf("%s %v: want %s %q, got %v", c.tool, c.in, c.code, c.want, err)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("%s %v took %s", c.tool, c.in, d)
		}
	}
	if got, _ := call(t, "text.render", root, map[string]any{"template": "{{.n}}", "values": map[string]any{"n": int64(123456789)}}); got["text"] != "123456789" {
		t.Fatalf("large integers must still print as digits: %v", got)
	}
}

// An evaluation past the evaluators' time is RESOURCE_EXHAUSTED, which is
// not retried: another attempt would meet the same limit, and no step
// timeout raises it. (Not parallel: it lowers the package's budget.)
func TestEvaluationPastItsTimeIsNotRetried(t *testing.T) {
	defer func(d time.Duration, m uint64) { evalTime, evalMemory = d, m }(evalTime, evalMemory)
	// The package's tests lower the memory budget; this one is for time.
	evalTime, evalMemory = 300*time.Millisecond, EvalMemory
	list := make([]any, 1000)
	for i := range list {
		list[i] = i
	}
	for _, c := range []struct {
		tool string
		in   map[string]any
	}{
		{"json.query", map[string]any{"query": "last(range(1e15))", "input": 1}},
		{"text.render", map[string]any{"template": "{{range $.a}}{{range $.a}}{{range $.a}}{{end}}{{end}}{{end}}", "values": map[string]any{"a": list}}},
	} {
		_, err := call(t, c.tool, t.TempDir(), c.in)
		code := caperr.CodeOf(err)
		if code != caperr.ResourceExhausted || caperr.Lookup(code).Retryable || !strings.Contains(err.Error(), "ran longer than 300ms, the evaluators' time limit") {
			t.Errorf("%s: %s %v", c.tool, code, err)
		}
	}
}

func TestCancellationReachesBuiltins(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	big := filepath.Join(root, "big")
	f, _ := os.Create(big)
	f.Truncate(8 << 30) // sparse: reading it takes seconds
	f.Close()
	for _, tool := range []string{"file.checksum", "file.read"} {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		fn, _ := Lookup(tool)
		start := time.Now()
		in := map[string]any{"path": "big"}
		if tool == "file.read" {
			in["max_bytes"] = int64(MaxRead)
		}
		_, err := fn(ctx, in, &Env{Root: root, Feedback: envelope.NewBuilder(tool)})
		cancel()
		if tool == "file.checksum" && caperr.CodeOf(err) != caperr.TaskTimeout {
			t.Errorf("%s: want TASK_TIMEOUT, got %v", tool, err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%s ignored its deadline for %s", tool, d)
		}
	}
}

func containsAny(s string, subs []string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}
