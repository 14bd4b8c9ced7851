package jq

import (
	"context"
	"encoding/json"
	"errors"
	"syscall"
	"testing"
	"time"
)

func TestEval(t *testing.T) {
	cases := []struct {
		query string
		input any
		want  string // results as JSON
		err   error
	}{
		{".a + 1", map[string]any{"a": 41}, `[42]`, nil},
		{".[] | select(. > 1)", []any{1, 2, 3}, `[2,3]`, nil},
		{"12345678901234567890", nil, `[12345678901234567890]`, nil},
		{"$ENV | length", nil, `[0]`, nil},
		{"1, halt, 2", nil, `[1]`, nil},
		{"empty", nil, `[]`, nil},
		{`error("no")`, nil, "", &QueryError{}},
		{".[", nil, "", &QueryError{}},
		{"range(200000)", nil, "", ErrTooMany},
		{`range(5) | "x" * 4000000`, nil, "", ErrTooLarge},
		{`"x" * 1000000000 | length`, nil, "", ErrMemory},
		{`.[300000000] = 1`, []any{}, "", ErrMemory},
		{`[range(1e10)]`, nil, "", ErrMemory},
		{`def f: [f]; f`, nil, "", ErrMemory},
		{`reduce range(10001) as $i (0; [.])`, nil, "", &QueryError{}},
		{`reduce range(9999) as $i (0; [.])`, nil, "", &QueryError{}},
		{".", deep(10001), "", &QueryError{}},
	}
	for _, c := range cases {
		got, err := Eval(context.Background(), c.query, c.input, 64<<20, time.Minute)
		var qe *QueryError
		switch {
		case c.err == nil && err != nil:
			t.Errorf("%s: %v", c.query, err)
		case c.err == nil:
			if b, _ := json.Marshal(got); string(b) != c.want {
				t.Errorf("%s: got %s, want %s", c.query, b, c.want)
			}
		case errors.As(c.err, &qe):
			if !errors.As(err, &qe) {
				t.Errorf("%s: want a query error, got %v", c.query, err)
			}
		case !errors.Is(err, c.err):
			t.Errorf("%s: want %v, got %v", c.query, c.err, err)
		}
	}
}

// deep is a list nested n levels.
func deep(n int) any {
	var v any = 0
	for range n {
		v = []any{v}
	}
	return v
}

// The memory a query takes is the child's, never its host's, and the
// kernel stops the child near its budget.
func TestMemoryStaysInTheChild(t *testing.T) {
	const budget = 64 << 20
	if _, err := Eval(context.Background(), `"x" * 1000000000 | length`, nil, budget, time.Minute); !errors.Is(err, ErrMemory) {
		t.Fatalf("want ErrMemory, got %v", err)
	}
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	if self.Maxrss > 200<<10 { // KiB
		t.Errorf("the test process peaked at %d MiB", self.Maxrss>>10)
	}
	if kids.Maxrss > 4*budget>>10 {
		t.Errorf("a child peaked at %d MiB, budget %d MiB", kids.Maxrss>>10, budget>>20)
	}
}

func TestCancelKillsTheChild(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Eval(ctx, `def f: f; f`, nil, 0, time.Minute)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("got %v after %s", err, time.Since(start))
	}
	// The pool still answers.
	if got, err := Eval(context.Background(), "1", nil, 0, time.Minute); err != nil || len(got) != 1 {
		t.Fatalf("%v %v", got, err)
	}
}

// BenchmarkEval is one small query through a warm child: the cost a
// json.query step pays for its memory bound.
func BenchmarkEval(b *testing.B) {
	in := map[string]any{"items": []any{map[string]any{"n": 1}, map[string]any{"n": 2}}}
	for b.Loop() {
		if _, err := Eval(context.Background(), ".items[] | .n", in, 0, time.Minute); err != nil {
			b.Fatal(err)
		}
	}
}

// A request frame carries its query and input exactly; frames it did not
// make are refused, never read past their end.
func TestRequestFrames(t *testing.T) {
	for _, c := range []struct{ query, input string }{{"", "1"}, {".a | .b", `{"a":{"b":[1,2]}}`}, {"\x00{{", ""}} {
		q, in, ok := decodeRequest(encodeRequest(c.query, []byte(c.input)))
		if !ok || q != c.query || string(in) != c.input {
			t.Fatalf("%q %q came back as %q %q %v", c.query, c.input, q, in, ok)
		}
	}
	for _, b := range [][]byte{nil, {0x80}, {5, 'a'}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}} {
		if _, _, ok := decodeRequest(b); ok {
			t.Fatalf("%x read as a frame", b)
		}
	}
}
