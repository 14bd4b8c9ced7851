package step

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/capflow/capflow/internal/beneath"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/report"
	"github.com/capflow/capflow/internal/runfolder"
	"github.com/capflow/capflow/internal/wfapi"
)

// A rerun (docs/run-control.md) reuses a step that succeeded in the
// earlier run when its tool's manifest digest and its evaluated inputs are
// unchanged: no tool runs, the recorded envelope is carried over, and its
// stored data is copied into this run's folder.

// earlier is an earlier run's report, indexed by step.
type earlier struct {
	file    string
	modTime time.Time
	steps   map[string]wfapi.StepResult
	digests map[string]string
}

// maxReportJSON bounds the earlier run's report a rerun reads.
const maxReportJSON = 256 << 20

// earlierRun reads the report of run id through the worker's cache (every
// step of a rerun asks).
func (e *Executor) earlierRun(id string) (*earlier, error) {
	file := filepath.Join(e.RunDir(id), "report.json")
	st, err := os.Stat(file)
	if err != nil {
		// A run from before RunFolderName keeps its legacy folder.
		file = filepath.Join(e.LegacyRunDir(id), "report.json")
		if st, err = os.Stat(file); err != nil {
			return nil, err
		}
	}
	e.mu.Lock()
	c := e.earlier
	e.mu.Unlock()
	if c != nil && c.file == file && c.modTime.Equal(st.ModTime()) {
		return c, nil
	}
	raw, err := beneath.ReadFile(filepath.Dir(file), "report.json", maxReportJSON, "the earlier run's report")
	if err != nil {
		return nil, err
	}
	var doc report.Document
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	c = &earlier{file: file, modTime: st.ModTime(), steps: map[string]wfapi.StepResult{}, digests: map[string]string{}}
	for _, s := range doc.Result.Steps {
		c.steps[s.ID] = s
	}
	if doc.Resolved != nil {
		for _, s := range doc.Resolved.Steps {
			c.digests[s.ID] = s.Digest
		}
	}
	e.mu.Lock()
	e.earlier = c
	e.mu.Unlock()
	return c, nil
}

// reuse returns the earlier run's result for the step when it may be
// reused, nil when the step must run (the log says why). A stored output
// found damaged is also told in the step's result (damage): the step ran
// again because of it.
func (e *Executor) reuse(step wfapi.StepCall, inputsSHA, key, stepDir, recDir string, log hclog.Logger) (res *wfapi.RunToolResult, damage *envelope.Feedback) {
	why := func(format string, args ...any) (*wfapi.RunToolResult, *envelope.Feedback) {
		log.Info("not reused", "from", step.ReuseFrom, "why", fmt.Sprintf(format, args...))
		return nil, nil
	}
	damaged := func(format string, args ...any) (*wfapi.RunToolResult, *envelope.Feedback) {
		msg := fmt.Sprintf(format, args...)
		log.Warn("not reused", "from", step.ReuseFrom, "why", msg)
		return nil, &envelope.Feedback{Phase: "reuse", Level: envelope.LevelWarning, Timestamp: envelope.Timestamp(envelope.Now()),
			Message: fmt.Sprintf("not reused from %s: %s; the step ran again", step.ReuseFrom, msg)}
	}
	prev, err := e.earlierRun(step.ReuseFrom)
	if err != nil {
		return why("the earlier run's report is unreadable: %v", err)
	}
	old, ok := prev.steps[step.ID]
	switch {
	case !ok:
		return why("the step is not in the earlier run")
	case old.Status != wfapi.StepSucceeded || old.Envelope == nil:
		return why("it did not succeed there (%s)", old.Status)
	case prev.digests[step.ID] != step.Digest:
		return why("its tool changed (%s, now %s)", short(prev.digests[step.ID]), short(step.Digest))
	case old.InputsSHA256 == "" || old.InputsSHA256 != inputsSHA:
		return why("its inputs changed")
	case old.CacheKey != "" && old.CacheKey != key:
		// The same key as the cache's (docs/cache.md): what the tool runs
		// or the files its inputs name changed.
		return why("its tool's files or its input files changed")
	}
	env := *old.Envelope
	env.Feedback = append(append([]envelope.Feedback(nil), env.Feedback...), envelope.Feedback{Phase: "reuse", Level: envelope.LevelInfo,
		Message: fmt.Sprintf("reused from %s: same tool and inputs, no tool ran", step.ReuseFrom), Timestamp: envelope.Timestamp(envelope.Now())})
	res = &wfapi.RunToolResult{Envelope: env, InputsSHA256: inputsSHA, ReusedFrom: step.ReuseFrom}
	if old.DataFile != "" {
		if err := e.InRun(step.ReuseFrom, old.DataFile); err != nil {
			return why("%v", err)
		}
		raw, bad := readStored(wfapi.StepOutcome{DataFile: old.DataFile, DataSHA256: old.DataSHA256})
		if bad != "" {
			return damaged("its stored output %s %s", old.DataFile, bad)
		}
		if err := os.MkdirAll(recDir, 0o755); err != nil {
			return why("%v", err)
		}
		p := filepath.Join(recDir, DataFile)
		if err := runfolder.WriteAtomic(p, raw); err != nil {
			return why("%v", err)
		}
		sum := sha256.Sum256(raw)
		res.DataFile, res.DataSHA256 = p, hex.EncodeToString(sum[:])
		res.Envelope.Data = map[string]any{"data_file": p, "bytes": len(raw)}
	}
	res.EnvelopeFile = storeEnvelope(stepDir, res.Envelope)
	log.Info("reused", "from", step.ReuseFrom)
	return res, nil
}
