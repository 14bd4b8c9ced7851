package console

import (
	"container/list"
	"sync"
)

// endedCache keeps the ended runs the console was asked for, the most
// recently asked first, within a bound of steps: a 40,000-step run's graph
// and states are a few hundred megabytes, so a console asked for many
// must let the oldest go (hostile findings at 6003afe, 25).
type endedCache struct {
	mu       sync.Mutex
	maxSteps int
	steps    int
	order    *list.List // of *endedEntry, most recent first
	byID     map[string]*list.Element
}

type endedEntry struct {
	id string
	e  *ended
	n  int
}

// maxEndedSteps bounds the steps of the ended runs kept; a run larger
// than it alone is kept until the next one is asked for.
const maxEndedSteps = 50000

func newEndedCache(maxSteps int) *endedCache {
	return &endedCache{maxSteps: maxSteps, order: list.New(), byID: map[string]*list.Element{}}
}

func (c *endedCache) Load(id string) (*ended, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byID[id]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*endedEntry).e, true
}

func (c *endedCache) Store(id string, e *ended) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byID[id]; ok {
		c.steps -= el.Value.(*endedEntry).n
		c.order.Remove(el)
	}
	n := len(e.states) + len(e.steps) + 1
	c.byID[id] = c.order.PushFront(&endedEntry{id: id, e: e, n: n})
	c.steps += n
	for c.steps > c.maxSteps && c.order.Len() > 1 {
		last := c.order.Back()
		old := last.Value.(*endedEntry)
		c.order.Remove(last)
		delete(c.byID, old.id)
		c.steps -= old.n
	}
}

// Len is how many runs are kept.
func (c *endedCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
