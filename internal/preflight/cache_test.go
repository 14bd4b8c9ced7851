package preflight

import (
	"testing"
	"time"

	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/plan"
)

func TestCacheDecisions(t *testing.T) {
	on := &manifest.Cache{On: true}
	off := &manifest.Cache{}
	day := &manifest.Cache{On: true, TTL: manifest.Duration(24 * time.Hour)}
	hour := &manifest.Cache{On: true, TTL: manifest.Duration(time.Hour)}
	tool := func(idem bool, c *manifest.Cache) *manifest.Manifest {
		return &manifest.Manifest{Name: "t", Version: "1.0.0", Idempotent: idem, Cache: c, Entrypoint: manifest.Entrypoint{Type: "command"}}
	}
	approve := &manifest.Manifest{Name: "approve", Version: "1.0.0", Idempotent: true, Entrypoint: manifest.Entrypoint{Type: manifest.EntryBuiltin, Name: "flow.approve"}}
	for _, c := range []struct {
		name   string
		step   *manifest.Cache
		m      *manifest.Manifest
		asked  bool
		cached bool
		ttl    string
		why    string
	}{
		{"nobody asks", nil, tool(true, nil), false, false, "", ""},
		{"the step asks", on, tool(true, nil), true, true, "168h", ""},
		{"the step's ttl", hour, tool(true, nil), true, true, "1h", ""},
		{"the tool asks for all its steps", nil, tool(true, day), true, true, "24h", ""},
		{"the step's ttl beats the tool's", hour, tool(true, day), true, true, "1h", ""},
		{"a step opts out of its tool's cache", off, tool(true, day), false, false, "", ""},
		{"not idempotent", on, tool(false, nil), true, false, "", "its tool t@1.0.0 is not idempotent: a cached result would skip its effects"},
		{"a decision", on, approve, true, false, "", "a person's decision is never reused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, asked := cacheFor(&plan.Step{ID: "s", Cache: c.step}, c.m, 168*time.Hour)
			if asked != c.asked || d.Cached != c.cached || d.TTL != c.ttl || d.Why != c.why {
				t.Fatalf("asked %v, decision %+v", asked, d)
			}
		})
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{168 * time.Hour: "168h", 10 * time.Minute: "10m", 90 * time.Minute: "1h30m", 30 * time.Second: "30s"} {
		if got := shortDuration(d); got != want {
			t.Errorf("%v: %q, want %q", d, got, want)
		}
	}
}
