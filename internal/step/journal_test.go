package step

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/wire"
)

// The run's journal keeps each step's last envelope; lines written at
// once by many steps never mix, and a torn last line is skipped.
func TestEnvelopeJournal(t *testing.T) {
	run := filepath.Join(t.TempDir(), "run")
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			big := strings.Repeat("x", 20000) // past a pipe buffer: one write still
			if p := appendJournal(run, fmt.Sprintf("s%d", i), envelope.Envelope{ToolID: "t", Message: big}); p != filepath.Join(run, JournalFile) {
				t.Errorf("journal %q", p)
			}
		}()
	}
	wg.Wait()
	appendJournal(run, "s1", envelope.Envelope{ToolID: "t", Message: "second attempt"})
	f, _ := os.OpenFile(filepath.Join(run, JournalFile), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"step":"s2","envelope":{"toolId":"t","mess`) // a worker died mid-write
	f.Close()
	own := storeEnvelope(filepath.Join(run, "steps", "cut"), envelope.Envelope{ToolID: "t", Message: "whole"})
	steps := []wfapi.StepResult{{ID: "s1", EnvelopeFile: filepath.Join(run, JournalFile)}, {ID: "s2", EnvelopeFile: filepath.Join(run, JournalFile)},
		{ID: "cut", EnvelopeFile: own}, {ID: "kept", Envelope: &wire.Envelope{Message: "in the result"}}}
	FillEnvelopes(steps)
	for id, want := range map[int]string{0: "second attempt", 2: "whole", 3: "in the result"} {
		if steps[id].Envelope == nil || steps[id].Envelope.Message != want {
			t.Errorf("step %s: %+v, want %q", steps[id].ID, steps[id].Envelope, want)
		}
	}
	if e := steps[1].Envelope; e == nil || len(e.Message) != 20000 {
		t.Errorf("s2: the torn line was read, or the whole one lost: %+v", e)
	}
}
