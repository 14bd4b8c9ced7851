// Package jq evaluates jq queries (github.com/itchyny/gojq) in child
// processes whose address space is capped by the kernel, so one query
// cannot take its host's memory: a single `"x" * 1e9` or `.[5e8] = 1` is one
// allocation that no sampling watchdog sees in time, and gojq exposes no
// allocation hook. A child is this same executable started under another
// argv[0] (see init), so the test binaries, the CLI and the worker all
// carry it and nothing extra is installed. Children are kept in a small
// pool and answer one query at a time; a child that runs out of memory or
// time is killed and only its query fails.
package jq

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// Limits of one evaluation. The memory budget is the child's Go heap
// limit; its address space may exceed that by the same amount again plus
// 64 MiB (the runtime's own mappings, fragmentation, thread stacks) before
// the kernel refuses.
const (
	DefaultMemory  = 256 << 20
	MaxResults     = 100000
	MaxResultBytes = 16 << 20
)

// Errors an evaluation ends with besides the query's own (*QueryError).
var (
	ErrMemory      = errors.New("needs more memory than its budget")
	ErrTooMany     = fmt.Errorf("yields more than %d results", MaxResults)
	ErrTooLarge    = fmt.Errorf("results are larger than %d MiB", MaxResultBytes>>20)
	errChildFailed = errors.New("jq evaluator exited")
)

// QueryError is a query that does not parse or fails while it runs.
type QueryError struct{ Msg string }

func (e *QueryError) Error() string { return e.Msg }

// childName is the argv[0] that makes this executable a jq child.
const childName = "capflow-jq-child"

// The child is entered before main, in the package's init, so every
// binary that links the package can serve as one (the pattern of
// moby's reexec): nothing else of the program runs in it.
func init() {
	if filepath.Base(os.Args[0]) == childName {
		os.Exit(serve(os.Args[1:], os.Stdin, os.Stdout))
	}
}

type request struct {
	Query string          `json:"query"`
	Input json.RawMessage `json:"input"`
}

type response struct {
	Results []json.RawMessage `json:"results"`
	Error   string            `json:"error,omitempty"`
	Kind    string            `json:"kind,omitempty"` // "query", "many" or "large"
}

// Eval runs query over input (JSON-like: maps, slices, strings, numbers)
// and returns its results decoded from JSON (numbers as json.Number).
// memory is the budget (DefaultMemory when 0). ctx ends the evaluation.
func Eval(ctx context.Context, query string, input any, memory int64) ([]any, error) {
	if memory <= 0 {
		memory = DefaultMemory
	}
	in, err := json.Marshal(input)
	if err != nil {
		return nil, &QueryError{Msg: "input is not JSON: " + err.Error()}
	}
	req, err := json.Marshal(request{Query: query, Input: in})
	if err != nil {
		return nil, err
	}
	res, err := ask(ctx, memory, req)
	if err != nil {
		return nil, err
	}
	switch res.Kind {
	case "query":
		return nil, &QueryError{Msg: res.Error}
	case "many":
		return nil, ErrTooMany
	case "large":
		return nil, ErrTooLarge
	}
	out := make([]any, 0, len(res.Results))
	for _, r := range res.Results {
		out = append(out, decode(r))
	}
	return out, nil
}

// Warm makes sure an idle child with this memory budget is waiting, so
// the next evaluation does not pay for starting one (an inline step's
// budget is for the query, not the process).
func Warm(memory int64) error {
	if memory <= 0 {
		memory = DefaultMemory
	}
	c, reused, err := pools.get(memory)
	if err != nil {
		return err
	}
	if !reused {
		// A new child answers its first request once its runtime is up.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := c.do(ctx, []byte(`{"query":".","input":null}`)); err != nil {
			c.kill()
			return err
		}
	}
	pools.put(memory, c)
	return nil
}

// Ready reports whether an idle child waits for a query of this budget;
// when none does, one is started in the background (Warm) and Ready
// answers false: a caller that must not wait (an inline step, inside a
// workflow task) goes another way meanwhile.
func Ready(memory int64) bool {
	if memory <= 0 {
		memory = DefaultMemory
	}
	pools.mu.Lock()
	idle := len(pools.idle[memory]) > 0
	pools.mu.Unlock()
	if !idle && warming.CompareAndSwap(false, true) {
		go func() {
			defer warming.Store(false)
			_ = Warm(memory)
		}()
	}
	return idle
}

// warming is set while Ready's background Warm runs (one at a time).
var warming atomic.Bool

// ask sends a request to a pooled child. An idle child that died while
// it waited (the OOM killer, say) fails before it read anything: the
// request goes once more, to a fresh one.
func ask(ctx context.Context, memory int64, req []byte) (response, error) {
	for try := 0; ; try++ {
		c, reused, err := pools.get(memory)
		if err != nil {
			return response{}, err
		}
		res, err := c.do(ctx, req)
		if err == nil {
			pools.put(memory, c)
			return res, nil
		}
		c.kill()
		if !reused || try > 0 || ctx.Err() != nil || !errors.Is(err, errChildFailed) {
			return response{}, err
		}
	}
}

func writeFrame(w io.Writer, b []byte) error {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

// readFrame reads one frame; a frame over max is errTooLarge (the rest
// of the stream is then unusable).
func readFrame(r io.Reader, max uint64) ([]byte, error) {
	var n [8]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint64(n[:])
	if size > max {
		return nil, ErrTooLarge
	}
	b := make([]byte, size)
	_, err := io.ReadFull(r, b)
	return b, err
}
