package jq

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"
	"runtime/metrics"
	"strconv"

	"github.com/itchyny/gojq"
)

// serve is a child's life: cap the address space, then answer requests
// read from in, one at a time, until in closes (its parent is gone).
func serve(args []string, in io.Reader, out io.Writer) int {
	memory := int64(DefaultMemory)
	if len(args) > 0 {
		if n, err := strconv.ParseInt(args[0], 10, 64); err == nil && n > 0 {
			memory = n
		}
	}
	// The heap limit makes the collector work before the hard cap is
	// near; the cap is what holds when one allocation would pass it.
	debug.SetMemoryLimit(memory)
	debug.SetMaxStack(64 << 20)
	if err := capAddressSpace(uint64(2*memory) + 64<<20); err != nil {
		return 3
	}
	r := bufio.NewReader(in)
	w := bufio.NewWriter(out)
	for {
		req, err := readFrame(r, uint64(memory))
		if err != nil {
			return 0
		}
		b, _ := json.Marshal(evaluate(req))
		if writeFrame(w, b) != nil || w.Flush() != nil {
			return 0
		}
		// An idle child gives back what a large query took.
		if heapBytes() > 16<<20 {
			debug.FreeOSMemory()
		}
	}
}

func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

func evaluate(raw []byte) (res response) {
	defer func() {
		if r := recover(); r != nil {
			res = response{Kind: "query", Error: fmt.Sprintf("jq failed: %v", r)}
		}
	}()
	var req request
	if err := json.Unmarshal(raw, &req); err != nil {
		return response{Kind: "query", Error: "bad request: " + err.Error()}
	}
	q, err := gojq.Parse(req.Query)
	if err != nil {
		return response{Kind: "query", Error: err.Error()}
	}
	code, err := gojq.Compile(q)
	if err != nil {
		return response{Kind: "query", Error: err.Error()}
	}
	iter := code.RunWithContext(context.Background(), normalize(decode(req.Input)))
	res = response{Results: []json.RawMessage{}}
	size := 0
	for {
		v, ok := iter.Next()
		if !ok {
			return res
		}
		if err, isErr := v.(error); isErr {
			if _, halt := err.(*gojq.HaltError); halt {
				return res
			}
			return response{Kind: "query", Error: err.Error()}
		}
		b, err := json.Marshal(v)
		if err != nil {
			return response{Kind: "query", Error: "result is not JSON: " + err.Error()}
		}
		if res.Results = append(res.Results, b); len(res.Results) > MaxResults {
			return response{Kind: "many"}
		}
		if size += len(b); size > MaxResultBytes {
			return response{Kind: "large"}
		}
	}
}

// decode reads JSON keeping numbers exact (json.Number).
func decode(b []byte) any {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	_ = dec.Decode(&v)
	return v
}

// normalize converts numbers to the types gojq computes with (int,
// float64); integers beyond int64 become floats, as in jq.
func normalize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			t[k] = normalize(x)
		}
	case []any:
		for i, x := range t {
			t[i] = normalize(x)
		}
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return int(i)
		}
		f, _ := t.Float64()
		return f
	}
	return v
}
