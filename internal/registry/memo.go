package registry

import (
	"errors"
	"sync"
)

// Memo is a registry kept between loads (Options.Memo). A registry it
// answers is shared: callers read it, never change it.
//
// It also shares loads between callers: loads asked for together read
// the tools' files once (under 300 runs at once, every Resolve looked at
// every tool folder, a tenth of a fast run's worker CPU). A load joins
// the next look to begin, never one already under way, which may have
// looked before an edit finished that the caller must see: a tool edited
// before Load is called is what Load answers, as without a Memo.
type Memo struct {
	mu sync.Mutex
	fp string
	r  *Registry

	looks   sync.Mutex
	running *look // the look under way
	next    *look // the look the callers since it began wait for
}

// look is one load shared by the callers that joined it.
type look struct {
	done    chan struct{}
	callers int
	r       *Registry
	err     error
}

// shared runs load once for the callers that ask while no look has begun
// since they asked, and gives each its answer.
func (m *Memo) shared(load func() (*Registry, error)) (*Registry, error) {
	if m == nil {
		return load()
	}
	m.looks.Lock()
	if m.next == nil {
		m.next = &look{done: make(chan struct{})}
	}
	l := m.next
	l.callers++
	for m.running != nil && m.next == l {
		cur := m.running
		m.looks.Unlock()
		<-cur.done
		m.looks.Lock()
	}
	if m.next != l { // another caller began it
		m.looks.Unlock()
		<-l.done
		return l.r, l.err
	}
	m.next, m.running = nil, l
	m.looks.Unlock()
	defer func() {
		if l.r == nil && l.err == nil { // load panicked: its waiters get an error
			l.err = errors.New("registry: the shared load did not finish")
		}
		m.looks.Lock()
		m.running = nil
		m.looks.Unlock()
		close(l.done)
	}()
	l.r, l.err = load()
	return l.r, l.err
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
