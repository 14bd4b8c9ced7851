package jq

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/itchyny/gojq"
)

// answer is a child's answer to one request. Results nested past what
// encoding/json writes (10,000 levels) are the query's error, where the
// empty answer had read as the evaluator's failure.
func answer(raw []byte) []byte {
	b, err := json.Marshal(evaluate(raw))
	if err != nil {
		b, _ = json.Marshal(response{Kind: "query", Error: "result is not JSON: " + err.Error()})
	}
	return b
}

func evaluate(raw []byte) (res response) {
	defer func() {
		if r := recover(); r != nil {
			res = response{Kind: "query", Error: fmt.Sprintf("jq failed: %v", r)}
		}
	}()
	query, in, ok := decodeRequest(raw)
	if !ok {
		return response{Kind: "query", Error: "bad request"}
	}
	input, err := decodeInput(in)
	if err != nil {
		// Valid JSON to its sender, but nested past what encoding/json
		// reads (10,000 levels).
		return response{Kind: "query", Error: "input is not JSON: " + err.Error()}
	}
	q, err := gojq.Parse(query)
	if err != nil {
		return response{Kind: "query", Error: err.Error()}
	}
	code, err := gojq.Compile(q)
	if err != nil {
		return response{Kind: "query", Error: err.Error()}
	}
	iter := code.RunWithContext(context.Background(), normalize(input))
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
	v, _ := decodeInput(b)
	return v
}

// decodeInput reads one JSON value keeping numbers exact, and nothing
// after it.
func decodeInput(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("more after its value")
	}
	return v, nil
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
