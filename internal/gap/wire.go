package gap

import "github.com/capflow/capflow/wire"

// Wire is r as clients read it (its manifest stays with the worker).
func (r StepResolution) Wire() wire.Resolution {
	return wire.Resolution{StepID: r.StepID, Capability: r.Capability, Tool: r.Tool, Version: r.Version, Digest: r.Digest, Source: r.Source, Reason: r.Reason}
}

// WireResolutions converts resolutions; nil stays nil.
func WireResolutions(rs []StepResolution) []wire.Resolution {
	if rs == nil {
		return nil
	}
	out := make([]wire.Resolution, len(rs))
	for i, r := range rs {
		out[i] = r.Wire()
	}
	return out
}
