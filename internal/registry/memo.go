package registry

import "sync"

// Memo is a registry kept between loads (Options.Memo). A registry it
// answers is shared: callers read it, never change it.
type Memo struct {
	mu sync.Mutex
	fp string
	r  *Registry
}

func (m *Memo) get(fp string) *Registry {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fp == fp {
		return m.r
	}
	return nil
}

func (m *Memo) put(fp string, r *Registry) {
	if m == nil || len(r.Warnings) > 0 {
		return // a registry with warnings is told again on the next load
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fp, m.r = fp, r
}
