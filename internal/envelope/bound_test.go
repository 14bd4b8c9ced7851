package envelope

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

func TestBounded(t *testing.T) {
	many := make([]Feedback, 30000)
	for i := range many {
		many[i] = Feedback{Phase: "p", Level: LevelInfo, Message: fmt.Sprintf("entry %d", i+1), Timestamp: "t"}
	}
	many[len(many)-1].Level = LevelError
	small := Envelope{ToolID: "t", Message: "ok", Feedback: []Feedback{{Phase: "p", Level: LevelInfo, Message: "m"}}}
	for _, c := range []struct {
		name    string
		in      Envelope
		cut     bool
		entries int
		check   func(Envelope) string
	}{
		{name: "small", in: small, entries: 1},
		{name: "a 3 MB message", in: Envelope{Message: strings.Repeat("é", 1500000)}, cut: true, check: func(e Envelope) string {
			if len(e.Message) > MaxMessage || !strings.HasSuffix(e.Message, "… [cut]") || !strings.HasPrefix(e.Message, "éé") {
				return fmt.Sprintf("message of %d bytes", len(e.Message))
			}
			return ""
		}},
		{name: "30,000 entries", in: Envelope{Feedback: many}, cut: true, entries: MaxFeedback, check: func(e Envelope) string {
			last := e.Feedback[len(e.Feedback)-1]
			if !strings.Contains(last.Message, "dropped 29901 of 30000 feedback entries") || !strings.Contains(last.Message, "in /step/env.json") {
				return "last entry: " + last.Message
			}
			if e.Feedback[0].Message != "entry 1" || e.Feedback[len(e.Feedback)-2].Level != LevelError {
				return "the first entry and the final error must stay"
			}
			return ""
		}},
		{name: "one huge entry", in: Envelope{Feedback: []Feedback{{Message: strings.Repeat("m", 9000), Detail: strings.Repeat("d", 9000)}}}, cut: true, entries: 1,
			check: func(e Envelope) string {
				if f := e.Feedback[0]; len(f.Message)+len(f.Detail) > MaxFeedbackEntry {
					return fmt.Sprintf("entry of %d bytes", len(f.Message)+len(f.Detail))
				}
				return ""
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, cut := Bounded(c.in, "/step/env.json")
			if cut != c.cut || len(got.Feedback) != c.entries {
				t.Fatalf("cut %v with %d entries, want %v with %d", cut, len(got.Feedback), c.cut, c.entries)
			}
			if c.check != nil {
				if why := c.check(got); why != "" {
					t.Fatal(why)
				}
			}
			if Size(&got) > 512<<10 {
				t.Fatalf("bounded envelope is %d bytes", Size(&got))
			}
		})
	}
}

// The problem CheckData names costs what the data is, however long its
// keys or however many values come before it: a pointer built on the way
// in copied a 64 KiB key at each of 64 Ki values (4.6 GB, found attacking
// issue 57). A long key is named by its size.
func TestCheckDataNamesAProblemInOnePass(t *testing.T) {
	key := strings.Repeat("k", 64<<10)
	list := make([]any, 64<<10)
	for i := range list {
		list[i] = json.Number("0")
	}
	list[len(list)-1] = json.Number("1e400")
	deep := any(json.Number("1"))
	for range MaxDataDepth + 5 {
		deep = map[string]any{key[:1024]: deep}
	}
	for _, c := range []struct {
		name string
		data any
		want string
	}{
		{"a number past float64 at the end of a list", map[string]any{key: list}, "data /<a key of 65536 bytes>/65535: 1e400 is not a number"},
		{"nested too deep under long keys", deep, ": nested deeper than 200 levels"},
	} {
		var err error
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		err = CheckData(c.data)
		runtime.ReadMemStats(&m1)
		if err == nil || !strings.Contains(err.Error(), c.want) || len(err.Error()) > 20000 || m1.TotalAlloc-m0.TotalAlloc > 64<<20 {
			t.Errorf("%s: %d bytes allocated, %.200v", c.name, m1.TotalAlloc-m0.TotalAlloc, err)
		}
	}
}

// Validate names a long bad value by its size, none of it shown (the
// message is masked later; a secret cut in it would not be found).
func TestValidateNamesLongValuesBySize(t *testing.T) {
	e := Envelope{ToolID: "t", Timestamp: "2026-11-21T10:00:00Z", Success: true,
		Feedback: []Feedback{{Phase: "p", Level: strings.Repeat("s", 100), Message: "m", Timestamp: "2026-11-21T10:00:00Z"}, {Phase: "p", Level: "loud", Message: "m", Timestamp: "2026-11-21T10:00:00Z"}}}
	errs := Validate(&e)
	if len(errs) != 2 || errs[0] != `feedback[0].level (100 bytes) is not info, warning or error` || errs[1] != `feedback[1].level "loud" is not info, warning or error` {
		t.Fatalf("%q", errs)
	}
}
