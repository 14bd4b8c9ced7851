package plan

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Reference kinds.
const (
	RefInputs = "inputs"
	RefSteps  = "steps"
	RefItem   = "item"  // a for_each step's item: ${item.PATH} or ${<as>.PATH}
	RefIndex  = "index" // a for_each step's item index: ${index}
)

// Ref is one parsed reference: ${inputs.NAME}, ${steps.ID.data.PATH},
// ${steps.ID.success}, and in a for_each step ${ITEM.PATH} and ${index}.
type Ref struct {
	Kind  string // RefInputs, RefSteps, RefItem or RefIndex
	Name  string // input name, step id, or the item's name
	Field string // for steps: "data" or "success"
	Path  []PathElem
	Raw   string // the text inside ${ }
}

// PathElem is one key or index of a data path.
type PathElem struct {
	Key     string
	Index   int
	IsIndex bool
}

func (p PathElem) String() string {
	if p.IsIndex {
		return strconv.Itoa(p.Index)
	}
	return p.Key
}

// PathString renders the path dot-separated.
func (r Ref) PathString() string {
	var parts []string
	for _, p := range r.Path {
		parts = append(parts, p.String())
	}
	return strings.Join(parts, ".")
}

func (r Ref) String() string { return "${" + r.Raw + "}" }

// Segment is a piece of a string value: literal text or a reference.
type Segment struct {
	Text string
	Ref  *Ref
}

// Template is a parsed string value.
type Template []Segment

// IsSingleRef reports whether the string is exactly one reference, which
// then takes the referenced value's JSON type.
func (t Template) IsSingleRef() bool { return len(t) == 1 && t[0].Ref != nil }

// Refs lists the template's references.
func (t Template) Refs() []Ref {
	var out []Ref
	for _, s := range t {
		if s.Ref != nil {
			out = append(out, *s.Ref)
		}
	}
	return out
}

// ParseTemplate splits s into literal text and references. "$${" is a
// literal "${". An unterminated or malformed reference is an error.
func ParseTemplate(s string) (Template, error) {
	var t Template
	var lit strings.Builder
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "$${") {
			lit.WriteString("${")
			i += 3
			continue
		}
		if strings.HasPrefix(s[i:], "${") {
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return nil, fmt.Errorf("unterminated reference %q (missing '}')", s[i:])
			}
			raw := s[i+2 : i+2+end]
			ref, err := ParseRef(raw)
			if err != nil {
				return nil, err
			}
			if lit.Len() > 0 {
				t = append(t, Segment{Text: lit.String()})
				lit.Reset()
			}
			t = append(t, Segment{Ref: &ref})
			i += 2 + end + 1
			continue
		}
		lit.WriteByte(s[i])
		i++
	}
	if lit.Len() > 0 || len(t) == 0 {
		t = append(t, Segment{Text: lit.String()})
	}
	return t, nil
}

// ParseRef parses the text inside ${ }.
func ParseRef(raw string) (Ref, error) {
	r := Ref{Raw: raw}
	parts := strings.Split(strings.TrimSpace(raw), ".")
	for _, p := range parts {
		if p == "" {
			return r, fmt.Errorf("reference ${%s} has an empty path element", raw)
		}
	}
	switch parts[0] {
	case "inputs":
		if len(parts) < 2 {
			return r, fmt.Errorf("reference ${%s} names no input (want ${inputs.NAME})", raw)
		}
		r.Kind, r.Name = "inputs", parts[1]
		r.Path = pathElems(parts[2:])
	case "steps":
		if len(parts) < 3 {
			return r, fmt.Errorf("reference ${%s} is incomplete (want ${steps.ID.data.PATH} or ${steps.ID.success})", raw)
		}
		r.Kind, r.Name, r.Field = "steps", parts[1], parts[2]
		switch r.Field {
		case "data":
			r.Path = pathElems(parts[3:])
		case "success":
			if len(parts) > 3 {
				return r, fmt.Errorf("reference ${%s}: success takes no path", raw)
			}
		default:
			return r, fmt.Errorf("reference ${%s}: a step exposes data or success, not %q", raw, r.Field)
		}
	case "index":
		if len(parts) > 1 {
			return r, fmt.Errorf("reference ${%s}: index takes no path", raw)
		}
		r.Kind, r.Name = RefIndex, "index"
	default:
		if !identRe.MatchString(parts[0]) {
			return r, fmt.Errorf("reference ${%s} must start with `inputs.`, `steps.` or a for_each item's name", raw)
		}
		r.Kind, r.Name = RefItem, parts[0]
		r.Path = pathElems(parts[1:])
	}
	return r, nil
}

var identRe = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

func pathElems(parts []string) []PathElem {
	var out []PathElem
	for _, p := range parts {
		if n, err := strconv.Atoi(p); err == nil && n >= 0 {
			out = append(out, PathElem{Index: n, IsIndex: true, Key: p})
		} else {
			out = append(out, PathElem{Key: p})
		}
	}
	return out
}

// StepOutcome is what later steps can reference of a finished step.
type StepOutcome struct {
	Success bool `json:"success"`
	Data    any  `json:"data,omitempty"`
}

// Scope holds the values references resolve against.
type Scope struct {
	Inputs map[string]any
	Steps  map[string]StepOutcome
	// Item, ItemName and Index are set for one item of a for_each step.
	Item     any
	ItemName string
	Index    int
}

// Lookup resolves one reference.
func (sc Scope) Lookup(r Ref) (any, error) {
	var cur any
	switch r.Kind {
	case "inputs":
		v, ok := sc.Inputs[r.Name]
		if !ok {
			return nil, fmt.Errorf("%s: no input %q", r, r.Name)
		}
		cur = v
	case "steps":
		o, ok := sc.Steps[r.Name]
		if !ok {
			return nil, fmt.Errorf("%s: step %q has no result", r, r.Name)
		}
		if r.Field == "success" {
			return o.Success, nil
		}
		cur = o.Data
	case RefIndex:
		if sc.ItemName == "" {
			return nil, fmt.Errorf("%s: not inside a for_each step", r)
		}
		return sc.Index, nil
	case RefItem:
		if sc.ItemName == "" || r.Name != sc.ItemName {
			return nil, fmt.Errorf("%s: %q is not this step's item", r, r.Name)
		}
		cur = sc.Item
	}
	for i, p := range r.Path {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[p.Key]
			if !ok {
				return nil, fmt.Errorf("%s: no field %q", r, pathPrefix(r.Path[:i+1]))
			}
			cur = v
		case []any:
			if !p.IsIndex || p.Index >= len(c) {
				return nil, fmt.Errorf("%s: %q is not an index of a %d-element list", r, p.Key, len(c))
			}
			cur = c[p.Index]
		default:
			return nil, fmt.Errorf("%s: %q is not an object or list", r, pathPrefix(r.Path[:i]))
		}
	}
	return cur, nil
}

func pathPrefix(p []PathElem) string {
	var s []string
	for _, e := range p {
		s = append(s, e.String())
	}
	return strings.Join(s, ".")
}

// MaxInterpolated bounds the text one Eval builds by interpolating
// references into strings: a plan of a few KB that repeats a large
// reference in one string built gigabytes, and killed its worker.
const MaxInterpolated = 64 << 20

// Eval resolves every reference inside a `with` value: strings that are
// exactly one reference take the value's type; other strings interpolate
// (non-strings as JSON), at most MaxInterpolated bytes in all; maps and
// lists are walked.
func (sc Scope) Eval(v any) (any, error) {
	left := MaxInterpolated
	return sc.eval(v, &left)
}

func (sc Scope) eval(v any, left *int) (any, error) {
	switch t := v.(type) {
	case string:
		tpl, err := ParseTemplate(t)
		if err != nil {
			return nil, err
		}
		if tpl.IsSingleRef() {
			return sc.Lookup(*tpl[0].Ref)
		}
		var b strings.Builder
		for _, s := range tpl {
			if s.Ref == nil {
				b.WriteString(s.Text)
				continue
			}
			x, err := sc.Lookup(*s.Ref)
			if err != nil {
				return nil, err
			}
			str, ok := x.(string)
			if !ok {
				j, _ := json.Marshal(x)
				str = string(j)
			}
			if *left -= len(str); *left < 0 {
				return nil, fmt.Errorf("%s: the text its references build passes %d MB", s.Ref, MaxInterpolated>>20)
			}
			b.WriteString(str)
		}
		return b.String(), nil
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			y, err := sc.eval(x, left)
			if err != nil {
				return nil, err
			}
			out[k] = y
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			y, err := sc.eval(x, left)
			if err != nil {
				return nil, err
			}
			out[i] = y
		}
		return out, nil
	}
	return v, nil
}

// CollectRefs lists every reference inside a `with` value, with the
// key path where each appears, in key order (it runs in workflow code,
// so the order must not depend on map iteration).
func CollectRefs(v any, at []string, visit func(path []string, tpl Template, err error)) {
	switch t := v.(type) {
	case string:
		tpl, err := ParseTemplate(t)
		visit(at, tpl, err)
	case map[string]any:
		keys := make([]string, 0, len(t))
		// Collecting keys to sort them is order-independent.
		//workflowcheck:ignore
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			CollectRefs(t[k], append(append([]string(nil), at...), k), visit)
		}
	case []any:
		for i, x := range t {
			CollectRefs(x, append(append([]string(nil), at...), strconv.Itoa(i)), visit)
		}
	}
}

// EachRef calls input for each plan input v references and step for each
// step, with whether it reads the step's data (in CollectRefs' order).
func EachRef(v any, input func(name string), step func(id string, data bool)) {
	CollectRefs(v, nil, func(_ []string, tpl Template, err error) {
		if err != nil {
			return
		}
		for _, r := range tpl.Refs() {
			switch r.Kind {
			case RefInputs:
				input(r.Name)
			case RefSteps:
				step(r.Name, r.Field == "data")
			}
		}
	})
}
