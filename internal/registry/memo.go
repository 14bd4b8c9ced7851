package registry

import (
	"sync"
	"time"
)

// Memo is a registry kept between loads (Options.Memo). A registry it
// answers is shared: callers read it, never change it.
type Memo struct {
	mu sync.Mutex
	fp string
	r  *Registry
	at time.Time // when the last look that found the tools as r has them began
}

// fresh is the kept registry when a look that found it began after
// after (Options.FreshAfter), else nil.
func (m *Memo) fresh(after time.Time) *Registry {
	if m == nil || after.IsZero() {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.r != nil && m.at.After(after) {
		return m.r
	}
	return nil
}

// get is the kept registry when the tools' files are as they were
// (fingerprint fp) in the look that began at began.
func (m *Memo) get(fp string, began time.Time) *Registry {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fp != fp {
		return nil
	}
	if began.After(m.at) {
		m.at = began
	}
	return m.r
}

func (m *Memo) put(fp string, r *Registry, began time.Time) {
	if m == nil || len(r.Warnings) > 0 {
		return // a registry with warnings is told again on the next load
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fp, m.r, m.at = fp, r, began
}
