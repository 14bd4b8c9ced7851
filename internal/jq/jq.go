// Package jq evaluates jq queries (github.com/itchyny/gojq) in child
// processes whose address space is capped by the kernel (childproc), so
// one query cannot take its host's memory: a single `"x" * 1e9` or
// `.[5e8] = 1` is one allocation that no sampling watchdog sees in time,
// and gojq exposes no allocation hook. A child that runs out of memory or
// time is killed and only its query fails.
package jq

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/itchyny/gojq"

	"github.com/capflow/capflow/internal/childproc"
)

// Limits of one evaluation. The memory budget is the child's Go heap
// limit; its address space may exceed that by the same amount again plus
// 64 MiB (the runtime's own mappings, fragmentation, thread stacks) before
// the kernel refuses.
const (
	DefaultMemory  = childproc.DefaultMemory
	MaxResults     = 100000
	MaxResultBytes = 16 << 20
)

// Errors an evaluation ends with besides the query's own (*QueryError).
var (
	ErrMemory   = childproc.ErrMemory
	ErrTooMany  = fmt.Errorf("yields more than %d results", MaxResults)
	ErrTooLarge = fmt.Errorf("results are larger than %d MiB", MaxResultBytes>>20)
)

// QueryError is a query that does not parse or fails while it runs.
type QueryError struct{ Msg string }

func (e *QueryError) Error() string { return e.Msg }

// children are the jq evaluators: this executable as capflow-jq-child.
var children = childproc.New("capflow-jq-child", MaxResultBytes)

// The child is entered before main, in the package's init, so every
// binary that links the package can serve as one: nothing else of the
// program runs in it.
func init() { children.Enter(answer) }

type response struct {
	Results []json.RawMessage `json:"results"`
	Error   string            `json:"error,omitempty"`
	Kind    string            `json:"kind,omitempty"` // "query", "many" or "large"
}

// Eval runs query over input (JSON-like: maps, slices, strings, numbers)
// and returns its results decoded from JSON (numbers as json.Number).
// memory is the budget (DefaultMemory when 0); the query has limit to
// run, counted once a child may take it (childproc.Ask), and ctx ends it.
func Eval(ctx context.Context, query string, input any, memory int64, limit time.Duration) ([]any, error) {
	in, err := json.Marshal(input)
	if err != nil {
		return nil, &QueryError{Msg: "input is not JSON: " + err.Error()}
	}
	return EvalJSON(ctx, query, in, memory, limit)
}

// EvalJSON is Eval over input as valid JSON text (the caller checks:
// json.Valid), which only the child decodes (a file's 15 MB of small
// objects took the worker a gigabyte of heap to decode; found attacking
// issue 57).
func EvalJSON(ctx context.Context, query string, input []byte, memory int64, limit time.Duration) ([]any, error) {
	b, err := children.Ask(ctx, memory, encodeRequest(query, input), limit)
	if errors.Is(err, childproc.ErrTooLarge) {
		return nil, ErrTooLarge
	}
	if err != nil {
		return nil, err
	}
	var res response
	if err := json.Unmarshal(b, &res); err != nil {
		if strings.Contains(err.Error(), "exceeded max depth") {
			// A result nested nearly 10,000 deep, inside the answer.
			return nil, &QueryError{Msg: "a result is nested too deep for JSON: " + err.Error()}
		}
		return nil, fmt.Errorf("%w: %v", childproc.ErrChildFailed, err)
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

// encodeRequest frames a query and its input for a child: the query's
// length, the query, then the input's JSON as it came, copied once (a
// JSON request re-scanned and copied the input, up to 16 MiB, again).
func encodeRequest(query string, input []byte) []byte {
	b := make([]byte, 0, binary.MaxVarintLen64+len(query)+len(input))
	b = binary.AppendUvarint(b, uint64(len(query)))
	return append(append(b, query...), input...)
}

// decodeRequest is encodeRequest's inverse; ok is false for a frame it
// did not make.
func decodeRequest(b []byte) (query string, input []byte, ok bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return "", nil, false
	}
	return string(b[k : k+int(n)]), b[k+int(n):], true
}

// Warm makes sure an idle child with this memory budget is waiting, so
// the next evaluation does not pay for starting one (an inline step's
// budget is for the query, not the process).
func Warm(memory int64) error { return children.Warm(memory) }

// Ready reports whether an idle child waits for a query of this budget;
// when none does, one is started in the background and Ready answers
// false: a caller that must not wait (an inline step, inside a workflow
// task) goes another way meanwhile.
func Ready(memory int64) bool { return children.Ready(memory) }

// Check parses and compiles a query in this process, as a child would, and
// returns its mistake: for a person's own check of a plan (the CLI), never
// a worker's, which leaves every parse to a child.
func Check(query string) error {
	q, err := gojq.Parse(query)
	if err == nil {
		_, err = gojq.Compile(q)
	}
	return err
}
