package gap

import (
	"cmp"
	"fmt"
	"sort"
	"strings"

	"github.com/capflow/capflow/internal/plan"
)

// freeName is name, or a variant no tool of the registry has: a tool
// scaffolded from the proposal must not shadow an existing one (a
// schema-incompatible file.read step proposing "file-read").
func (c *checker) freeName(name, stepID string) string {
	if c.reg == nil || c.reg.Tool(name, "") == nil {
		return name
	}
	for i := 0; ; i++ {
		cand := proposedName(name + "." + stepID)
		if i > 0 {
			cand = fmt.Sprintf("%s-%d", cand, i+1)
		}
		if c.reg.Tool(cand, "") == nil {
			return cand
		}
	}
}

// proposedName turns youtube.download into youtube-download.
func proposedName(capability string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(capability) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			if b.Len() > 0 && !strings.HasSuffix(b.String(), "-") {
				b.WriteByte('-')
			}
		}
	}
	n := strings.Trim(b.String(), "-")
	if n == "" {
		n = "new-tool"
	}
	return n
}

// proposeSchemas derives a tool contract from how the plan uses the step:
// inputs from its `with`, outputs from what later steps reference.
func (c *checker) proposeSchemas(s *plan.Step) (map[string]any, map[string]any) {
	if cc := s.CapabilityContract; cc != nil && cc.InputSchema != nil && cc.OutputSchema != nil {
		return cc.InputSchema, cc.OutputSchema
	}
	inProps := map[string]any{}
	var req []any
	keys := make([]string, 0, len(s.With))
	for k := range s.With {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		inProps[k] = c.valueSchema(s.With[k])
		req = append(req, k)
	}
	in := map[string]any{"type": "object", "properties": inProps}
	if len(req) > 0 {
		in["required"] = req
	}
	out := map[string]any{"type": "object", "properties": map[string]any{}}
	var outReq []any
	seen := map[string]bool{}
	for _, other := range c.p.Steps {
		plan.CollectRefs(other.With, nil, func(path []string, tpl plan.Template, err error) {
			if err != nil {
				return
			}
			for _, r := range tpl.Refs() {
				if r.Kind != "steps" || r.Name != s.ID || r.Field != "data" || len(r.Path) == 0 || r.Path[0].IsIndex {
					continue
				}
				field := r.Path[0].Key
				if seen[field] {
					continue
				}
				seen[field] = true
				fs := map[string]any{}
				if len(r.Path) == 1 && tpl.IsSingleRef() {
					if cm := cmp.Or(c.tools[other.ID], c.ranked[other.ID]); cm != nil && len(path) == 1 {
						if props, ok := cm.InputSchema["properties"].(map[string]any); ok {
							if ps, ok := props[path[0]].(map[string]any); ok {
								fs = copyTypeOnly(ps)
							}
						}
					}
				} else if len(r.Path) > 1 {
					if r.Path[1].IsIndex {
						fs = map[string]any{"type": "array"}
					} else {
						fs = map[string]any{"type": "object"}
					}
				}
				out["properties"].(map[string]any)[field] = fs
				outReq = append(outReq, field)
			}
		})
	}
	if len(outReq) > 0 {
		sort.Slice(outReq, func(i, j int) bool { return outReq[i].(string) < outReq[j].(string) })
		out["required"] = outReq
	}
	if s.CapabilityContract != nil {
		if s.CapabilityContract.InputSchema != nil {
			in = s.CapabilityContract.InputSchema
		}
		if s.CapabilityContract.OutputSchema != nil {
			out = s.CapabilityContract.OutputSchema
		}
	}
	return in, out
}

func copyTypeOnly(s map[string]any) map[string]any {
	out := map[string]any{}
	for _, k := range []string{"type", "enum", "items"} {
		if v, ok := s[k]; ok {
			out[k] = v
		}
	}
	return out
}

// propose draws the schemas of the tools the gaps propose, once every step
// is resolved.
func (c *checker) propose() {
	for _, s := range c.proposing {
		g := c.gaps[s.ID]
		g.ProposedInputSchema, g.ProposedOutputSchema = c.proposeSchemas(s)
	}
}

// at places g at its step in the plan's file, where the plan came from one.
func (c *checker) at(s *plan.Step, g *Gap) *Gap {
	if s.Line > 0 {
		g.File, g.Line = c.p.File, s.Line
	}
	return g
}
