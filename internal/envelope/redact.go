package envelope

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"sort"
	"strconv"
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

// NewRedactor builds a redactor for the given secret values. Each value is
// also masked in the forms it takes on the way out: JSON-escaped (a tool's
// JSON events and envelopes), URL-encoded, base64 (standard and URL, with
// and without padding), hex, and, for a multi-line value
// such as a PEM key, line by line (a tool may print it a line at a time).
func NewRedactor(values ...string) *Redactor {
	seen := map[string]bool{}
	var vs []string
	add := func(v string) {
		if len(v) >= minSecretLen && !seen[v] {
			seen[v] = true
			vs = append(vs, v)
		}
	}
	for _, v := range values {
		add(v)
		js, _ := json.Marshal(v)
		add(string(js[1 : len(js)-1]))
		add(url.QueryEscape(v))
		// Encodings a tool may print a token in.
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			add(enc.EncodeToString([]byte(v)))
		}
		add(hex.EncodeToString([]byte(v)))
		add(strings.ToUpper(hex.EncodeToString([]byte(v))))
		if strings.ContainsAny(v, "\r\n") {
			for _, l := range strings.FieldsFunc(v, func(r rune) bool { return r == '\n' || r == '\r' }) {
				add(strings.TrimSpace(l))
			}
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

// Cut redacts s that was cut short at its end: a secret whole in it is
// masked, and so is the start of one the cut left at its end (at least
// minSecretLen bytes of it), which no whole match finds.
func (r *Redactor) Cut(s string) string {
	if r.Empty() {
		return s
	}
	// The edge is found in the raw text: masked first, a secret inside
	// the piece (a password inside a URL) hid the piece from the search.
	k := r.edge(func(v string, k int) bool { return strings.HasSuffix(s, v[:k]) }, len(s))
	if k == 0 {
		return r.String(s)
	}
	return r.String(s[:r.straddle(s, len(s)-k, true)]) + Mask
}

// straddle moves a cut at i back (or forward) past every whole secret
// that crosses it, until none does: String masks no secret cut through.
func (r *Redactor) straddle(s string, i int, back bool) int {
	for moved := true; moved; {
		moved = false
		for _, v := range r.values {
			// Any v found within len(v)-1 bytes each side of i crosses i.
			lo, hi := max(0, i-len(v)+1), min(len(s), i+len(v)-1)
			if j := strings.Index(s[lo:hi], v); j >= 0 {
				if i, moved = lo+j, true; !back {
					i += len(v)
				}
			}
		}
	}
	return i
}

// edge is the longest part (k bytes, at least minSecretLen, less than
// the whole) of any secret that at finds at the cut edge; 0 for none.
// The longest of all values, not the first value's: two secrets (or forms
// of one) may share a piece.
func (r *Redactor) edge(at func(v string, k int) bool, room int) int {
	best := 0
	for _, v := range r.values {
		for k := min(len(v)-1, room); k >= minSecretLen && k > best; k-- {
			if at(v, k) {
				best = k
				break
			}
		}
	}
	return best
}

// CutFront redacts s that was cut short at its start (a tail): a secret
// whole in it is masked, and so is the end of one the cut left at its
// start (at least minSecretLen bytes of it).
func (r *Redactor) CutFront(s string) string {
	if r.Empty() {
		return s
	}
	k := r.edge(func(v string, k int) bool { return strings.HasPrefix(s, v[len(v)-k:]) }, len(s))
	if k == 0 {
		return r.String(s)
	}
	return Mask + r.String(s[r.straddle(s, k, false):])
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
	case json.Number:
		return r.number(string(t), v)
	case float64:
		return r.number(strconv.FormatFloat(t, 'f', -1, 64), v)
	case float32:
		return r.number(strconv.FormatFloat(float64(t), 'f', -1, 32), v)
	case int64:
		return r.number(strconv.FormatInt(t, 10), v)
	case int:
		return r.number(strconv.Itoa(t), v)
	case uint64:
		return r.number(strconv.FormatUint(t, 10), v)
	default:
		return v
	}
}

// number masks a number whose text is a secret (a numeric token sent
// back as a JSON number is still the token).
func (r *Redactor) number(text string, v any) any {
	if r.String(text) != text {
		return Mask
	}
	return v
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
