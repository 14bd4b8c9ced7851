package preflight

import "github.com/capflow/capflow/internal/gap"

// Limit is a tool's `limits:` that applies to the plan's steps: held
// across every run and worker (docs/manifests.md#limits).
type Limit struct {
	Tool   string   `json:"tool"` // name@version
	Steps  []string `json:"steps"`
	Limits string   `json:"limits"` // "concurrency 2, rate 5/s per account"
}

// limits lists the plan's tools that declare limits, with their steps.
func limits(res []gap.StepResolution) []Limit {
	var out []Limit
	at := map[string]int{}
	for _, r := range res {
		m := r.Manifest
		if m == nil || m.Limits == nil {
			continue
		}
		key := m.Name + "@" + m.Version
		i, seen := at[key]
		if !seen {
			i, at[key] = len(out), len(out)
			out = append(out, Limit{Tool: key, Limits: m.Limits.Describe()})
		}
		out[i].Steps = append(out[i].Steps, r.StepID)
	}
	return out
}
