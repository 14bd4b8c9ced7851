package gap

import "github.com/capflow/capflow/wire"

// Wire is g as clients read it.
func (g Gap) Wire() wire.Gap { return wire.Gap(g) }

// Wire is r as clients read it (its manifest stays with the worker).
func (r StepResolution) Wire() wire.Resolution {
	return wire.Resolution{StepID: r.StepID, Capability: r.Capability, Tool: r.Tool, Version: r.Version, Digest: r.Digest, Source: r.Source, Reason: r.Reason}
}

// WireGaps converts gaps; nil stays nil.
func WireGaps(gaps []Gap) []wire.Gap {
	if gaps == nil {
		return nil
	}
	out := make([]wire.Gap, len(gaps))
	for i, g := range gaps {
		out[i] = g.Wire()
	}
	return out
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
