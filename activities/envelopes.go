package activities

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"

	"github.com/capflow/capflow/internal/envelope"
)

// A succeeded step's envelope file is written in the background, in
// order with every other envelope write of this worker: the step's result
// carries the envelope whole, and the file is read only when the workflow
// left the envelope out of what it passes on (a large run's result, a
// segment's checkpoint), by Finalize, which waits for the writes first.
// Writing it before answering cost a fast regular step a tenth of its
// time here (two files, a folder for a builtin). A worker that dies in between
// loses the file, never the envelope: it is in the step's result in the
// run's history.

// envelopeWriter writes envelope files one after another (FIFO: a later
// attempt's file never loses to an earlier one's).
type envelopeWriter struct {
	once    sync.Once
	queue   chan envelopeWrite
	pending sync.WaitGroup
}

type envelopeWrite struct {
	dir  string
	raw  []byte
	done chan struct{} // closed once written (nil: nobody waits)
}

// maxQueuedEnvelopes bounds the queue: past it, a write waits its turn.
const maxQueuedEnvelopes = 1024

func (w *envelopeWriter) start() {
	w.once.Do(func() {
		w.queue = make(chan envelopeWrite, maxQueuedEnvelopes)
		go func() {
			for ew := range w.queue {
				writeEnvelope(ew.dir, ew.raw)
				if ew.done != nil {
					close(ew.done)
				}
				w.pending.Done()
			}
		}()
	})
}

// store queues the envelope's file and returns its path; wait makes it
// return once the file is written ("" when it could not be).
func (w *envelopeWriter) store(stepDir string, env envelope.Envelope, wait bool) string {
	raw, err := json.Marshal(env)
	if err != nil {
		return ""
	}
	w.start()
	ew := envelopeWrite{dir: stepDir, raw: raw}
	if wait {
		ew.done = make(chan struct{})
	}
	w.pending.Add(1)
	w.queue <- ew
	p := envelopePath(stepDir)
	if wait {
		<-ew.done
		if _, err := os.Stat(p); err != nil {
			return ""
		}
	}
	return p
}

// flush waits until every queued envelope file is written.
func (w *envelopeWriter) flush() { w.pending.Wait() }

// writeEnvelope writes the file in place, not through a temporary one and
// a rename: this writer is its only one, the readers wait for it (flush),
// and a file torn by a crash reads as missing, as an unwritten one does.
func writeEnvelope(stepDir string, raw []byte) {
	p := envelopePath(stepDir)
	if os.MkdirAll(filepath.Dir(p), 0o755) != nil {
		return
	}
	_ = os.WriteFile(p, raw, 0o644)
}

// FlushEnvelopes waits for the envelope files queued so far (a worker
// calls it as it stops); a function, not a method, so registering the
// activities does not take it for one.
func FlushEnvelopes(a *Activities) { a.envelopes.flush() }
