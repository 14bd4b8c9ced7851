package workflows

import "go.temporal.io/sdk/workflow"

// compactSelector is the scheduler's long-lived selector. The SDK's keeps
// every case it was given for its whole life (a segment's), each fired
// future with its result, and walks them all on every Select: a 100,000-item
// for_each kept every batch's result and items, the worker's memory growing
// with the run. This one rebuilds the SDK's selector from the cases still
// live, in the order they were added, once as many futures have fired as
// are pending. The SDK fires the first ready case in that order, and a
// fired future's case never fires again, so the same case fires as before:
// the commands, and so replay, are unchanged.
type compactSelector struct {
	ctx   workflow.Context
	sel   workflow.Selector
	cases []*selectCase
	def   func()
	fired int
	// closed: a receive case saw its channel closed (see AddReceive).
	closed bool
}

// selectCase is one case as it was added: a future fires once (done), a
// channel's case stays.
type selectCase struct {
	future   workflow.Future
	onFuture func(workflow.Future)
	recv     workflow.ReceiveChannel
	onRecv   func(workflow.ReceiveChannel, bool)
	send     workflow.SendChannel
	value    any
	onSend   func()
	done     bool
}

// compactAfter is the fewest fired futures that make a rebuild worth it.
const compactAfter = 16

func newCompactSelector(ctx workflow.Context) *compactSelector {
	return &compactSelector{ctx: ctx, sel: workflow.NewSelector(ctx)}
}

func (s *compactSelector) AddReceive(c workflow.ReceiveChannel, f func(workflow.ReceiveChannel, bool)) workflow.Selector {
	return s.add(&selectCase{recv: c, onRecv: func(c workflow.ReceiveChannel, more bool) {
		// The SDK drops a closed channel's case only when it finds it
		// closed as Select begins (one closed while Select waits fires
		// once more): not worth copying, so a selector that saw a channel
		// closed is never rebuilt.
		s.closed = s.closed || !more
		f(c, more)
	}})
}

func (s *compactSelector) AddSend(c workflow.SendChannel, v any, f func()) workflow.Selector {
	return s.add(&selectCase{send: c, value: v, onSend: f})
}

func (s *compactSelector) AddFuture(f workflow.Future, fn func(workflow.Future)) workflow.Selector {
	c := &selectCase{future: f}
	c.onFuture = func(f workflow.Future) {
		c.done = true
		s.fired++
		fn(f)
	}
	return s.add(c)
}

func (s *compactSelector) AddDefault(f func()) {
	s.def = f
	s.sel.AddDefault(f)
}

func (s *compactSelector) HasPending() bool { return s.sel.HasPending() }

func (s *compactSelector) Select(ctx workflow.Context) {
	s.sel.Select(ctx)
	if !s.closed && s.fired >= compactAfter && 2*s.fired >= len(s.cases) {
		s.compact()
	}
}

func (s *compactSelector) add(c *selectCase) workflow.Selector {
	s.cases = append(s.cases, c)
	s.addTo(s.sel, c)
	return s
}

func (s *compactSelector) addTo(sel workflow.Selector, c *selectCase) {
	switch {
	case c.future != nil:
		sel.AddFuture(c.future, c.onFuture)
	case c.recv != nil:
		sel.AddReceive(c.recv, c.onRecv)
	default:
		sel.AddSend(c.send, c.value, c.onSend)
	}
}

// compact drops the fired futures' cases: a new SDK selector gets the live
// ones, in their order.
func (s *compactSelector) compact() {
	live := s.cases[:0]
	sel := workflow.NewSelector(s.ctx)
	for _, c := range s.cases {
		if !c.done {
			live = append(live, c)
			s.addTo(sel, c)
		}
	}
	clear(s.cases[len(live):])
	if s.def != nil {
		sel.AddDefault(s.def)
	}
	s.cases, s.sel, s.fired = live, sel, 0
}
