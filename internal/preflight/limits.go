package preflight

import (
	"github.com/capflow/capflow/internal/gap"
	"github.com/capflow/capflow/internal/manifest"
)

// Limit is a `limits:` that applies to the plan's steps, a tool's (its
// manifest) or a capability's (capflow.yaml): held across every run and
// worker (docs/manifests.md#limits).
type Limit struct {
	Tool       string   `json:"tool,omitempty"`       // name@version
	Capability string   `json:"capability,omitempty"` // or a capability's
	Steps      []string `json:"steps"`
	Limits     string   `json:"limits"` // "concurrency 2, rate 5/s per account"
}

// limits lists the limits that hold the plan's steps: the capabilities'
// first (a step takes their slots first), then the tools'.
func limits(res []gap.StepResolution, byCapability map[string]manifest.Limits) []Limit {
	var out []Limit
	at := map[string]int{}
	add := func(key string, l Limit, step string) {
		i, seen := at[key]
		if !seen {
			i, at[key] = len(out), len(out)
			out = append(out, l)
		}
		out[i].Steps = append(out[i].Steps, step)
	}
	for _, r := range res {
		if l, ok := byCapability[r.Capability]; ok {
			add("capability "+r.Capability, Limit{Capability: r.Capability, Limits: l.Describe()}, r.StepID)
		}
	}
	for _, r := range res {
		if m := r.Manifest; m != nil && m.Limits != nil {
			add("tool "+m.Name+"@"+m.Version, Limit{Tool: m.Name + "@" + m.Version, Limits: m.Limits.Describe()}, r.StepID)
		}
	}
	return out
}

// Limited reports whether a limit holds the step: it runs as a regular
// activity, which leases its slot.
func (r *Report) Limited(step string) bool {
	for _, l := range r.Limits {
		for _, s := range l.Steps {
			if s == step {
				return true
			}
		}
	}
	return false
}
