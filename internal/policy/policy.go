// Package policy loads policy.yaml (docs/plans.md) and decides
// whether a plan may run: allow/deny globs over capabilities (deny wins)
// and limits. A plan may narrow the policy, never widen it.
package policy

import (
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/egress"
	"github.com/capflow/capflow/internal/projfile"
	"github.com/capflow/capflow/internal/schema"
	"github.com/capflow/capflow/internal/yamldoc"
	"github.com/capflow/capflow/schemas"
)

// Limit names.
const (
	MaxSteps       = "max_steps"
	MaxToolRetries = "max_tool_retries"
	MaxRunSeconds  = "max_run_seconds"
	MaxParallel    = "max_parallel"
	MaxLLMCalls    = "max_llm_calls"
)

// DefaultLimits apply where policy.yaml (or its absence) sets none.
var DefaultLimits = map[string]int{
	MaxSteps: 200, MaxToolRetries: 5, MaxRunSeconds: 3600, MaxParallel: 16, MaxLLMCalls: 3,
}

// Policy is an effective policy.
type Policy struct {
	// Allow is nil when everything is allowed. Each entry is one layer
	// (project, plan): a capability must match every layer.
	Allow  [][]string     `json:"allow,omitempty"`
	Deny   []string       `json:"deny,omitempty"`
	Limits map[string]int `json:"limits"`
	// Sandbox is the project's confinement of command tools.
	Sandbox SandboxMode `json:"sandbox"`
	// Network is what runs may reach beyond public addresses: the file's
	// alone, as Sandbox is.
	Network []egress.Entry `json:"-"`
	// Source names the file the policy came from ("" = defaults only).
	Source string `json:"source,omitempty"`
	// Notes records where a plan asked for more than the policy allows.
	Notes []string `json:"notes,omitempty"`
}

// Default is "allow all, default limits".
func Default() *Policy {
	return &Policy{Limits: copyLimits(DefaultLimits)}
}

func copyLimits(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Load reads policy.yaml; a missing file gives Default().
func Load(file, display string) (*Policy, error) { return LoadIn("/", file, display) }

// LoadIn is Load of a project's policy: a file beneath root is never read
// through a link that leads out of it.
func LoadIn(root, file, display string) (*Policy, error) {
	data, err := projfile.ReadProjectFile(root, file, display)
	if errors.Is(err, os.ErrNotExist) {
		return Default(), nil
	}
	if err != nil {
		return nil, caperr.WithCode(err, caperr.ConfigError)
	}
	return Parse(display, data)
}

// Spec is the file's shape (and a plan's `policy:` block).
type Spec struct {
	// Sandbox is the file's alone: a plan's policy cannot change it.
	Sandbox string         `json:"sandbox,omitempty"`
	Network *NetworkSpec   `json:"network,omitempty"`
	Allow   []string       `json:"allow,omitempty"`
	Deny    []string       `json:"deny,omitempty"`
	Limits  map[string]int `json:"limits,omitempty"`
}

// NetworkSpec is the file's `network:` block.
type NetworkSpec struct {
	Allow []string `json:"allow,omitempty"`
}

// Parse validates a policy document with positions.
func Parse(display string, data []byte) (*Policy, error) {
	doc, err := yamldoc.Parse(display, data)
	if err != nil {
		return nil, caperr.WithCode(err, caperr.ConfigError)
	}
	if doc.Root.Kind == yamldoc.Null {
		p := Default()
		p.Source = display
		return p, nil
	}
	raw := doc.Root.Interface()
	sch := schema.Embedded("policy.schema.json", schemas.Must("policy.schema.json"))
	var probs caperr.Problems
	for _, v := range sch.Validate(raw) {
		p := doc.Root.PosOf(v.Path)
		probs = append(probs, caperr.New(caperr.ConfigError, "%s", v.Message).At(display, p.Line, p.Column, yamldoc.FieldPath(v.Path)))
	}
	m, _ := raw.(map[string]any)
	for _, key := range []string{"allow", "deny"} {
		list, _ := m[key].([]any)
		for i, g := range list {
			if s, ok := g.(string); ok {
				if _, err := path.Match(s, ""); err != nil {
					p := doc.Root.PosOf([]string{key, fmt.Sprint(i)})
					probs = append(probs, caperr.New(caperr.ConfigError, "%q is not a valid glob", s).At(display, p.Line, p.Column, fmt.Sprintf("%s[%d]", key, i)))
				}
			}
		}
	}
	network, nprobs := networkAllow(doc, display, m)
	probs = append(probs, nprobs...)
	if len(probs) > 0 {
		probs.Sort()
		return nil, probs
	}
	var spec Spec
	if err := schemaDecode(raw, &spec); err != nil {
		return nil, caperr.Wrap(caperr.ConfigError, err, "policy").At(display, 1, 1, "")
	}
	// The project's policy defines the limits (raising or lowering the
	// defaults); only a plan's own layer is restricted to narrowing.
	p := Default()
	p.Source = display
	p.Sandbox, _ = ParseSandboxMode(spec.Sandbox) // the schema admitted only known modes
	p.Network = network
	for k, v := range spec.Limits {
		p.Limits[k] = v
	}
	spec.Limits = nil
	p.apply(spec, "")
	return p, nil
}

// networkAllow reads network.allow, each bad entry a positioned problem.
func networkAllow(doc *yamldoc.Doc, display string, m map[string]any) ([]egress.Entry, caperr.Problems) {
	n, _ := m["network"].(map[string]any)
	list, _ := n["allow"].([]any)
	var out []egress.Entry
	var probs caperr.Problems
	for i, v := range list {
		s, ok := v.(string)
		if !ok {
			continue // the schema said so
		}
		e, err := egress.ParseEntry(s)
		if err != nil {
			field := fmt.Sprintf("network.allow[%d]", i)
			p := doc.Root.PosOf([]string{"network", "allow", fmt.Sprint(i)})
			probs = append(probs, caperr.New(caperr.ConfigError, "%v", err).At(display, p.Line, p.Column, field))
			continue
		}
		out = append(out, e)
	}
	return out, probs
}

// apply layers a spec onto p. Limits only ever go down; an attempt to
// raise one is noted, not honoured.
func (p *Policy) apply(s Spec, who string) {
	if s.Allow != nil {
		p.Allow = append(p.Allow, s.Allow)
	}
	p.Deny = append(p.Deny, s.Deny...)
	for k, v := range s.Limits {
		cur, ok := p.Limits[k]
		if !ok || v <= cur {
			p.Limits[k] = v
		} else if who != "" {
			p.Notes = append(p.Notes, fmt.Sprintf("%s asks for %s %d; the policy allows %d, which stays in force", who, k, v, cur))
		}
	}
	sort.Strings(p.Notes)
}

// Narrow returns p with a plan's own policy layered on top.
func (p *Policy) Narrow(s Spec, who string) *Policy {
	out := &Policy{Allow: append([][]string(nil), p.Allow...), Deny: append([]string(nil), p.Deny...),
		Limits: copyLimits(p.Limits), Sandbox: p.Sandbox, Network: p.Network, Source: p.Source, Notes: append([]string(nil), p.Notes...)}
	out.apply(s, who)
	return out
}

// Decision is the verdict for one capability.
type Decision struct {
	Allowed bool
	// Rule is the rule that decided, e.g. `deny "shell.*"` or
	// `allow ["file.*"] (no match)`.
	Rule string
}

// Capability decides one capability: deny wins over allow; with allow
// lists, every layer must match.
func (p *Policy) Capability(c string) Decision {
	for _, d := range p.Deny {
		if ok, _ := path.Match(d, c); ok {
			return Decision{false, fmt.Sprintf("deny %q", d)}
		}
	}
	for _, layer := range p.Allow {
		matched := false
		for _, a := range layer {
			if ok, _ := path.Match(a, c); ok {
				matched = true
				break
			}
		}
		if !matched {
			return Decision{false, fmt.Sprintf("allow [%s] has no match", strings.Join(quoteAll(layer), ", "))}
		}
	}
	return Decision{Allowed: true}
}

func quoteAll(xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprintf("%q", x)
	}
	return out
}

// Spent is p with n of limit k already used by who (the router's model
// calls, counted against max_llm_calls with the agent steps'): what is
// left, and a note saying why.
func (p *Policy) Spent(k string, n int, who string) *Policy {
	if n <= 0 {
		return p
	}
	out := p.Narrow(Spec{}, "")
	left := max(0, out.Limits[k]-n)
	out.Notes = append(out.Notes, fmt.Sprintf("%s made %d of %s %d: %d left", who, n, k, out.Limits[k], left))
	out.Limits[k] = left
	return out
}
