package step

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/runfolder"
	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/wire"
)

// Where a step's whole envelope is kept, for the report to read when the
// workflow left it out of what it passes on (a large run's result, a
// segment's checkpoint):
//
//   - an envelope the step's result carries whole is appended to the run's
//     journal, <run>/envelopes.jsonl, a line a step: one write to a file
//     that exists, where a file of its own cost a fast step a tenth of its
//     time here (a file created a step, a folder for a builtin);
//   - an envelope that had to be cut (its message, its feedback), and a
//     failed attempt's, get a file of their own beside the step's folder,
//     <run>/steps/<id>.envelope.json, as the contract asks.

// JournalFile is the run's envelope journal, in its folder.
const JournalFile = "envelopes.jsonl"

// journalLine is one line of the journal.
type journalLine struct {
	Step     string            `json:"step"`
	Envelope envelope.Envelope `json:"envelope"`
}

// appendJournal appends a step's envelope to the run's journal and
// returns the journal's path ("" when it could not).
func appendJournal(runDir, stepID string, env envelope.Envelope) string {
	if runDir == "" || appendLine(runDir, JournalFile, journalLine{Step: stepID, Envelope: env}) != nil {
		return ""
	}
	return filepath.Join(runDir, JournalFile)
}

// appendLine appends v as one JSON line to dir/name, making dir when it
// is missing. One write a line, with O_APPEND: lines written at once, even
// by other worker processes, never mix.
func appendLine(dir, name string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	// Beneath dir: a link a tool left under the name is not followed out
	// of its folder (the worker does not append to a file it names).
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(raw, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readJournal reads a run's journal: the last envelope of each step (a
// retried step's last attempt), for the steps in want. A torn last line
// (a worker that died mid-write) is skipped.
func readJournal(path string, want map[string]bool) map[string]*envelope.Envelope {
	out := map[string]*envelope.Envelope{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	// Only the last line of each wanted step is decoded whole.
	last := map[string][]byte{}
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		var head struct {
			Step     string          `json:"step"`
			Envelope json.RawMessage `json:"envelope"`
		}
		if len(line) > 0 && json.Unmarshal(line, &head) == nil && want[head.Step] {
			last[head.Step] = head.Envelope
		}
		if err != nil {
			break
		}
	}
	for step, raw := range last {
		var env envelope.Envelope
		if json.Unmarshal(raw, &env) == nil {
			out[step] = &env
		}
	}
	return out
}

// storeEnvelope writes a step's envelope into a file of its own beside
// the step's folder; "" when it could not (the workflow then keeps passing
// the envelope itself).
func storeEnvelope(stepDir string, env envelope.Envelope) string {
	raw, err := json.Marshal(env)
	if err != nil {
		return ""
	}
	p := envelopePath(stepDir)
	if os.MkdirAll(filepath.Dir(p), 0o755) != nil || runfolder.WriteAtomic(p, raw) != nil {
		return ""
	}
	return p
}

// FillEnvelopes puts back the envelopes the workflow left out: from their
// own files, or from the run's journal, read once.
func FillEnvelopes(steps []wfapi.StepResult) {
	journals := map[string]map[string]bool{}
	for i := range steps {
		s := &steps[i]
		switch {
		case s.Envelope != nil || s.EnvelopeFile == "":
		case filepath.Base(s.EnvelopeFile) == JournalFile:
			if journals[s.EnvelopeFile] == nil {
				journals[s.EnvelopeFile] = map[string]bool{}
			}
			journals[s.EnvelopeFile][s.ID] = true
		default:
			var env wire.Envelope
			if raw, err := os.ReadFile(s.EnvelopeFile); err == nil && json.Unmarshal(raw, &env) == nil {
				s.Envelope = &env
			}
		}
	}
	for path, want := range journals {
		found := readJournal(path, want)
		for i := range steps {
			if s := &steps[i]; s.Envelope == nil && s.EnvelopeFile == path {
				s.Envelope = found[s.ID]
			}
		}
	}
}
