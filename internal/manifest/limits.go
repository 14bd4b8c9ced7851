package manifest

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/capflow/capflow/internal/suggest"
)

// Limits is a manifest's `limits:` block (docs/manifests.md#limits): how
// many steps of the tool run at once and how many start per second or
// minute, across every run and worker; with Key, per value of that input.
type Limits struct {
	Concurrency int    `json:"concurrency,omitempty"`
	Rate        string `json:"rate,omitempty"` // "5/s", "30/m"
	Key         string `json:"key,omitempty"`  // "${inputs.account}"
}

// The rates a limit keeps: at most a million starts a second, at least
// one a day; and its largest concurrency (the schemas say it too).
const (
	MinInterval    = time.Microsecond
	MaxInterval    = 24 * time.Hour
	MaxConcurrency = 10000
)

// interval is the rate's time between two starts, as a float of
// nanoseconds (0: no rate; +Inf: a rate of zero).
func (l Limits) interval() float64 {
	n, per, ok := strings.Cut(l.Rate, "/")
	r, err := strconv.ParseFloat(n, 64)
	if !ok || err != nil || math.IsNaN(r) || r < 0 {
		return 0
	}
	unit := float64(time.Second)
	if per == "m" {
		unit = float64(time.Minute)
	}
	return unit / r
}

// Interval is the time between two starts the rate allows (0: no rate),
// within MinInterval and MaxInterval (Problems refuses a rate outside).
func (l Limits) Interval() time.Duration {
	f := l.interval()
	if f == 0 {
		return 0
	}
	return time.Duration(min(max(f, float64(MinInterval)), float64(MaxInterval)))
}

// Problems are what is wrong with a limit the schema cannot see, each
// with its field: a rate that lets nothing start, or one too slow or too
// fast to keep; a limit with neither concurrency nor rate.
func (l Limits) Problems() [][2]string {
	var out [][2]string
	if f := l.interval(); l.Rate != "" && strings.Contains(l.Rate, "/") {
		switch {
		case math.IsInf(f, 1) || f == 0:
			out = append(out, [2]string{"rate", fmt.Sprintf("rate %q lets nothing start (a rate above zero, like 1/m)", l.Rate)})
		case f > float64(MaxInterval):
			out = append(out, [2]string{"rate", fmt.Sprintf("rate %q is slower than one start a day, the slowest kept (1/m is one a minute)", l.Rate)})
		case f < float64(MinInterval):
			out = append(out, [2]string{"rate", fmt.Sprintf("rate %q is faster than a million starts a second, the fastest kept: leave rate out for no rate", l.Rate)})
		}
	}
	if l.Concurrency <= 0 && l.Rate == "" {
		out = append(out, [2]string{"", "a limit needs concurrency or rate (key alone limits nothing)"})
	}
	return out
}

// KeyInput is the input whose value the limit is kept per ("": one limit).
func (l Limits) KeyInput() string {
	return strings.TrimSuffix(strings.TrimPrefix(l.Key, "${inputs."), "}")
}

// LimitsOf reads a `limits:` block as the schema admitted it.
func LimitsOf(raw map[string]any) Limits {
	var l Limits
	switch c := raw["concurrency"].(type) {
	case int:
		l.Concurrency = c
	case int64:
		l.Concurrency = int(c)
	case uint64:
		l.Concurrency = int(min(c, 1<<31))
	case float64:
		l.Concurrency = int(c)
	case json.Number:
		n, _ := c.Int64()
		l.Concurrency = int(n)
	}
	l.Rate, _ = raw["rate"].(string)
	l.Key, _ = raw["key"].(string)
	return l
}

// Describe is the limit as `plan check` and `tools show` print it.
func (l Limits) Describe() string {
	var parts []string
	if l.Concurrency > 0 {
		parts = append(parts, fmt.Sprintf("concurrency %d", l.Concurrency))
	}
	if l.Rate != "" {
		parts = append(parts, "rate "+l.Rate)
	}
	s := strings.Join(parts, ", ")
	if l.Key != "" {
		s += " per " + l.KeyInput()
	}
	return s
}

// limitsChecks reports positioned problems of a `limits:` block the schema
// cannot see (Limits.Problems), and a key naming no input of the tool.
func limitsChecks(raw map[string]any, at func(path []string, format string, args ...any)) {
	lim, ok := raw["limits"].(map[string]any)
	if !ok {
		return
	}
	for _, p := range LimitsOf(lim).Problems() {
		at(slices.DeleteFunc([]string{"limits", p[0]}, func(s string) bool { return s == "" }), "%s", p[1])
	}
	k, ok := lim["key"].(string)
	if !ok {
		return
	}
	field := (Limits{Key: k}).KeyInput()
	in, _ := raw["input_schema"].(map[string]any)
	props, _ := in["properties"].(map[string]any)
	if _, ok := props[field]; !ok && field != "" {
		names := slices.Sorted(maps.Keys(props))
		at([]string{"limits", "key"}, "key %q names no input of this tool (its input_schema has no property %q)%s", k, field, suggest.Phrase(field, names))
	}
}
