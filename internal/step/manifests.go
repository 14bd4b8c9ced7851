package step

import (
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/registry"
)

// Registry loads the project's registry (cheap: the cache in state_dir)
// and remembers every manifest by digest for the steps resolved to it.
func (e *Executor) Registry() (*registry.Registry, error) {
	reg, err := e.Project.Registry()
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if reg == e.listed {
		// The memo's registry (every Resolve's): its tools are known.
		return reg, nil
	}
	e.listed = reg
	if e.tools == nil {
		e.tools = map[string]*manifest.Manifest{}
	}
	for _, m := range reg.Tools {
		e.tools[m.Digest] = m
	}
	return reg, nil
}

// Manifest returns the exact manifest a step was resolved to. A tool
// whose manifest changed since resolution is refused: the run executes
// what its history recorded, or nothing.
func (e *Executor) Manifest(name, version, digest string) (*manifest.Manifest, error) {
	if m := e.known(digest); m != nil {
		return m, nil
	}
	reg, err := e.Registry()
	if err != nil {
		return nil, err
	}
	if m := e.known(digest); m != nil {
		return m, nil
	}
	if cur := reg.Tool(name, version); cur != nil {
		return nil, caperr.New(caperr.ConfigError, "tool %s@%s changed since the plan was resolved (digest %s, now %s)", name, version, short(digest), short(cur.Digest))
	}
	return nil, caperr.New(caperr.ToolNotFound, "tool %s@%s is not available on this worker", name, version)
}

func (e *Executor) known(digest string) *manifest.Manifest {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.tools[digest]
}

func short(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return d
}
