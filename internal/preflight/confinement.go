package preflight

import (
	"sort"

	"github.com/capflow/capflow/internal/gap"
	"github.com/capflow/capflow/internal/sandbox"
)

// Confinement is how one tool of the plan runs (docs/sandbox.md): what a
// reviewer reads to see what the plan's tools may touch.
type Confinement struct {
	Tool  string   `json:"tool"` // name@version
	Steps []string `json:"steps"`
	// Sandbox is the tool's confinement in one line.
	Sandbox string `json:"sandbox"`
	// Beyond lists what its manifest asks beyond the defaults (network,
	// more writable paths, larger limits); empty: the defaults.
	Beyond []string `json:"beyond"`
}

// confinements lists the plan's tools that start processes.
func confinements(res []gap.StepResolution) []Confinement {
	byTool := map[string]*Confinement{}
	var order []string
	for _, r := range res {
		m := r.Manifest
		if m == nil || (m.Entrypoint.Type != "command" && m.Sandbox == nil) {
			continue
		}
		key := m.Name + "@" + m.Version
		c := byTool[key]
		if c == nil {
			beyond := sandbox.Beyond(m.Sandbox)
			if beyond == nil {
				beyond = []string{}
			}
			c = &Confinement{Tool: key, Sandbox: sandbox.Confinement(m), Beyond: beyond}
			byTool[key] = c
			order = append(order, key)
		}
		c.Steps = append(c.Steps, r.StepID)
	}
	sort.Strings(order)
	out := []Confinement{}
	for _, k := range order {
		out = append(out, *byTool[k])
	}
	return out
}
