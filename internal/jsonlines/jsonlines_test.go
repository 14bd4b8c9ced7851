package jsonlines

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestLines(t *testing.T) {
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	in := ping + "   \n\nnot json\n{\"cut\":[\n" + strings.Repeat("x", 100) + "\n" + `[{"jsonrpc":"2.0","id":"a","result":{}}]`
	var bad []Fault
	r := New(strings.NewReader(in), 80, func(f Fault) error { bad = append(bad, f); return nil })
	out, err := io.ReadAll(r)
	if err != nil || string(out) != ping+"\n"+`[{"jsonrpc":"2.0","id":"a","result":{}}]`+"\n" {
		t.Fatalf("%q %v", out, err)
	}
	if len(bad) != 3 || bad[0].Code != -32700 || !strings.Contains(bad[2].Reason, "more than 80 bytes") {
		t.Fatalf("bad lines: %+v", bad)
	}
	stop := errors.New("stop")
	r = New(strings.NewReader(ping+"\n{\"cut\n"+ping+"\n"), 80, func(Fault) error { return stop })
	out, err = io.ReadAll(r)
	if !errors.Is(err, stop) || string(out) != ping+"\n" {
		t.Fatalf("%q %v", out, err)
	}
}

// TestCheck: what the MCP SDK would end a session on is refused here (the
// attack on capflow mcp's stdio found each of these).
func TestCheck(t *testing.T) {
	for line, want := range map[string]int{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`:               0,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`: 0,
		`{"jsonrpc":"2.0","id":"x","result":{}}`:                 0,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`:             0,
		`{"jsonrpc":"2.0","id":null,"error":{"code":1}}`:         0,
		`not json`: -32700,
		`[]`:       -32600,
		`null`:     -32600,
		`{}`:       -32600,
		`[{}]`:     -32600,
		`123`:      -32600,
		`"str"`:    -32600,
		`[1,2]`:    -32600,
		`{"jsonrpc":"1.0","id":7,"method":"tools/list"}`:              -32600,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`:        -32600,
		`{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}`:            -32600,
		`{"jsonrpc":"2.0","id":1,"method":7}`:                         -32600,
		`{"jsonrpc":"2.0","id":1}`:                                    -32600,
		strings.Repeat("[", 1001) + strings.Repeat("]", 1001):         -32700,
		`{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":"[[[["}}`: 0,
	} {
		f := Check([]byte(line))
		got := 0
		if f != nil {
			got = f.Code
		}
		if got != want {
			t.Errorf("%.60s: %d (%+v), want %d", line, got, f, want)
		}
	}
}
