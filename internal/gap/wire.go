package gap

import "github.com/capflow/capflow/client"

// Wire is g as clients read it.
func (g Gap) Wire() client.Gap { return client.Gap(g) }

// Wire is r as clients read it (its manifest stays with the worker).
func (r StepResolution) Wire() client.Resolution {
	return client.Resolution{StepID: r.StepID, Capability: r.Capability, Tool: r.Tool, Version: r.Version, Digest: r.Digest, Source: r.Source, Reason: r.Reason}
}

// WireGaps converts gaps; nil stays nil.
func WireGaps(gaps []Gap) []client.Gap {
	if gaps == nil {
		return nil
	}
	out := make([]client.Gap, len(gaps))
	for i, g := range gaps {
		out[i] = g.Wire()
	}
	return out
}

// WireResolutions converts resolutions; nil stays nil.
func WireResolutions(rs []StepResolution) []client.Resolution {
	if rs == nil {
		return nil
	}
	out := make([]client.Resolution, len(rs))
	for i, r := range rs {
		out[i] = r.Wire()
	}
	return out
}
