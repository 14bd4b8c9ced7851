package telemetry

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"

	"go.opentelemetry.io/otel/trace"
)

// Workflow code runs again on replay, and again on another worker after
// one is lost: a span it starts must be the same span each time, or its
// children are orphaned and the run splits over several traces. So the
// spans of runs and steps take identifiers derived from what identifies
// them (the run, the step), handed to the SDK's ID generator through the
// context the span is started with.

type idsKey struct{}

type fixedIDs struct {
	trace trace.TraceID
	span  trace.SpanID
}

// withIDs is ctx asking the next span started with it to take these IDs
// (the trace ID only when it has no parent).
func withIDs(ctx context.Context, ids fixedIDs) context.Context {
	return context.WithValue(ctx, idsKey{}, ids)
}

// derive is a deterministic trace and span ID for parts.
func derive(parts ...string) fixedIDs {
	h := sha256.New()
	for _, p := range parts {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	sum := h.Sum(nil)
	var ids fixedIDs
	copy(ids.trace[:], sum[:16])
	copy(ids.span[:], sum[16:24])
	// All-zero IDs are invalid; a hash is never that, but be sure.
	ids.trace[0] |= 1
	ids.span[0] |= 1
	return ids
}

// idGenerator gives random IDs, or the ones the context asks for.
type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if ids, ok := ctx.Value(idsKey{}).(fixedIDs); ok {
		return ids.trace, ids.span
	}
	var t trace.TraceID
	binary.BigEndian.PutUint64(t[:8], rand.Uint64())
	binary.BigEndian.PutUint64(t[8:], rand.Uint64()|1)
	return t, randomSpanID()
}

func (idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if ids, ok := ctx.Value(idsKey{}).(fixedIDs); ok {
		return ids.span
	}
	return randomSpanID()
}

func randomSpanID() trace.SpanID {
	var s trace.SpanID
	binary.BigEndian.PutUint64(s[:], rand.Uint64()|1)
	return s
}
