package envelope

import (
	"sort"
	"strings"
)

// Mask replaces a secret value wherever it appears.
const Mask = "[REDACTED]"

// minSecretLen keeps short values (like "1" or "on") from blanking out
// ordinary text; such values are not secrets worth the name anyway.
const minSecretLen = 4

// Redactor removes known secret values from text and structured data.
type Redactor struct {
	values []string
	repl   *strings.Replacer
}

// NewRedactor builds a redactor for the given secret values.
func NewRedactor(values ...string) *Redactor {
	var vs []string
	for _, v := range values {
		if len(v) >= minSecretLen {
			vs = append(vs, v)
		}
	}
	// Longest first so a secret that contains another is masked whole.
	sort.Slice(vs, func(i, j int) bool { return len(vs[i]) > len(vs[j]) })
	var pairs []string
	for _, v := range vs {
		pairs = append(pairs, v, Mask)
	}
	return &Redactor{values: vs, repl: strings.NewReplacer(pairs...)}
}

// Empty reports whether there is nothing to redact.
func (r *Redactor) Empty() bool { return r == nil || len(r.values) == 0 }

// String redacts s.
func (r *Redactor) String(s string) string {
	if r.Empty() {
		return s
	}
	return r.repl.Replace(s)
}

// Bytes redacts b.
func (r *Redactor) Bytes(b []byte) []byte {
	if r.Empty() {
		return b
	}
	return []byte(r.repl.Replace(string(b)))
}

// Value redacts every string inside a JSON-like value, keys included.
func (r *Redactor) Value(v any) any {
	if r.Empty() {
		return v
	}
	switch t := v.(type) {
	case string:
		return r.String(t)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[r.String(k)] = r.Value(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = r.Value(x)
		}
		return out
	default:
		return v
	}
}

// Envelope redacts every text field of e in place.
func (r *Redactor) Envelope(e *Envelope) {
	if r.Empty() {
		return
	}
	e.Message = r.String(e.Message)
	for i := range e.Feedback {
		f := &e.Feedback[i]
		f.Message, f.Detail, f.Phase = r.String(f.Message), r.String(f.Detail), r.String(f.Phase)
	}
	e.Data = r.Value(e.Data)
}
