package preflight

import (
	"fmt"
	"strings"
	"time"

	"github.com/capflow/capflow/internal/builtin"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/plan"
)

// DefaultCacheTTL is how old a cached result may be when neither step,
// tool nor project says.
const DefaultCacheTTL = 168 * time.Hour

// CacheDecision says whether a step's results are cached and why not
// (docs/cache.md): what `plan check` shows for every step that asks, or
// whose tool asks.
type CacheDecision struct {
	Step string `json:"step"`
	Tool string `json:"tool,omitempty"` // name@version
	// Cached: a hit no older than TTL is reused instead of running the tool.
	Cached bool   `json:"cached"`
	TTL    string `json:"ttl,omitempty"`
	// Why the step asks and is not cached.
	Why string `json:"why,omitempty"`
}

// cacheFor decides one step: the step's own setting wins over its
// tool's; the TTL is the step's, else the tool's, else the project's.
// It reports false for a step where nobody asked.
func cacheFor(s *plan.Step, m *manifest.Manifest, projectTTL time.Duration) (CacheDecision, bool) {
	d := CacheDecision{Step: s.ID}
	var asked *manifest.Cache
	switch {
	case s.Cache != nil:
		asked = s.Cache
	case m != nil && m.Cache != nil:
		asked = m.Cache
	}
	if asked == nil || !asked.On {
		return d, false
	}
	if m == nil {
		return d, false // a gap: the report says so already
	}
	d.Tool = m.Name + "@" + m.Version
	ttl := projectTTL
	for _, c := range []*manifest.Cache{m.Cache, s.Cache} {
		if c != nil && c.TTL > 0 {
			ttl = c.TTL.D()
		}
	}
	switch {
	case m.Entrypoint.Type == manifest.EntryBuiltin && builtin.TraitsOf(m.Entrypoint.Name).WaitsForPerson:
		d.Why = "a person's decision is never reused"
	case !m.Idempotent:
		d.Why = fmt.Sprintf("its tool %s is not idempotent: a cached result would skip its effects", d.Tool)
	default:
		d.Cached, d.TTL = true, shortDuration(ttl)
	}
	return d, true
}

// cacheDecisions decides every step of the plan that asks.
func cacheDecisions(p *plan.Plan, tools map[string]*manifest.Manifest, projectTTL time.Duration) []CacheDecision {
	var out []CacheDecision
	for _, s := range p.Steps {
		if s.Plan != "" {
			continue
		}
		d, asked := cacheFor(s, tools[s.ID], projectTTL)
		if !asked {
			continue
		}
		out = append(out, d)
	}
	return out
}

// shortDuration writes 168h for 168h0m0s, 10m for 10m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
