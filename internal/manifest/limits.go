package manifest

import (
	"fmt"
	"maps"
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

// Interval is the time between two starts the rate allows (0: no rate).
func (l Limits) Interval() time.Duration {
	n, per, ok := strings.Cut(l.Rate, "/")
	r, err := strconv.ParseFloat(n, 64)
	if !ok || err != nil || r <= 0 {
		return 0
	}
	unit := time.Second
	if per == "m" {
		unit = time.Minute
	}
	return time.Duration(float64(unit) / r)
}

// KeyInput is the input whose value the limit is kept per ("": one limit).
func (l Limits) KeyInput() string {
	return strings.TrimSuffix(strings.TrimPrefix(l.Key, "${inputs."), "}")
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
// cannot see: a rate of zero, a key naming no input of the tool.
func limitsChecks(raw map[string]any, at func(path []string, format string, args ...any)) {
	lim, ok := raw["limits"].(map[string]any)
	if !ok {
		return
	}
	if r, ok := lim["rate"].(string); ok && (Limits{Rate: r}).Interval() == 0 && strings.Contains(r, "/") {
		at([]string{"limits", "rate"}, "rate %q lets nothing start (a rate above zero, like 1/m)", r)
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
