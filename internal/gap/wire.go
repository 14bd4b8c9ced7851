package gap

import (
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/wire"
)

// resolved is step s resolved to the tool of m, for why.
func resolved(s *plan.Step, m *manifest.Manifest, why string) StepResolution {
	return StepResolution{Resolution: wire.Resolution{StepID: s.ID, Capability: s.Capability, Tool: m.Name, Version: m.Version,
		Digest: m.Digest, Source: m.Source, Reason: why}, Manifest: m}
}

// WireResolutions are the resolutions as clients read them (their
// manifests stay with the worker); nil stays nil.
func WireResolutions(rs []StepResolution) []wire.Resolution {
	if rs == nil {
		return nil
	}
	out := make([]wire.Resolution, len(rs))
	for i, r := range rs {
		out[i] = r.Resolution
	}
	return out
}
