package console

import (
	"sync"

	"github.com/capflow/capflow/client"
)

// laidOut is a run's drawn graph and its groups.
type laidOut struct {
	svg    []byte
	groups map[string][]string
	graph  *client.Graph
}

// svgCache keeps the last laid-out graphs of runs.
type svgCache struct {
	mu    sync.Mutex
	max   int
	order []string
	m     map[string]laidOut
}

func newSVGCache(n int) *svgCache { return &svgCache{max: n, m: map[string]laidOut{}} }

func (c *svgCache) get(id string) (laidOut, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[id]
	return b, ok
}

func (c *svgCache) put(id string, b laidOut) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[id]; !ok {
		c.order = append(c.order, id)
	}
	c.m[id] = b
	for len(c.order) > c.max {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
}
