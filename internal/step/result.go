package step

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/report"
	"github.com/capflow/capflow/internal/runfolder"
	"github.com/capflow/capflow/internal/wfapi"
)

// finalReason says why a failure its envelope marks final is not retried:
// the tool said retryable: false, or gave a code that is not a contract
// code (toolrun's knownCode).
const finalReason = "not retried: the failure is final (the tool's retryable: false, or an error code that is not a contract code)"

// fail ends the attempt with the tool's failed envelope: recorded in the
// step folder, cut to fit history, and returned as an ApplicationError of
// its code (retryable only when the code is and the tool is idempotent).
func (r *stepRun) fail(env envelope.Envelope) (*wfapi.RunToolResult, error) {
	code := caperr.ToolFailure
	if env.Error != nil {
		code = env.Error.Code
	}
	why := notRetried(code, r.in.Step.Idempotent, r.attempt, r.maxAttempts)
	if notRetryable(env.Error) && (r.attempt < r.maxAttempts || !r.in.Step.Idempotent) {
		// Final whatever the tool's idempotence: the stronger reason.
		why = finalReason
	}
	if why != "" {
		env.Message += " (" + why + ")"
		env.Feedback = append(env.Feedback, envelope.Feedback{Phase: "retry", Level: envelope.LevelInfo, Message: why, Timestamp: envelope.Timestamp(envelope.Now())})
	}
	item := r.in.Step.Item != nil
	if !item {
		if story := attemptStory(r.recDir, r.attempt, r.maxAttempts, r.began, fmt.Sprintf("failed (%s)", code)); story != nil {
			env.Feedback = append(env.Feedback, *story)
		}
		recordAttempt(r.recDir, report.Attempt{N: r.attempt, Code: code, Message: env.Message, Started: r.began, Ended: time.Now()})
	}
	res := &wfapi.RunToolResult{Envelope: env, Attempt: r.attempt, LostData: r.lost}
	if !item {
		res.EnvelopeFile = storeEnvelope(r.stepDir, env)
	}
	fit(res, r.stepDir, r.recDir)
	r.log.Info("step failed", "code", code, "idempotent", r.in.Step.Idempotent, "message", res.Envelope.Message)
	return nil, &Failed{Code: code, Idempotent: r.in.Step.Idempotent, Result: res}
}

// succeed keeps a succeeded attempt's envelope: its data by reference when
// large, the whole envelope in the run's journal (or, when it must be cut,
// a file beside the step's folder: envelopes.go), the result cut to fit.
func (r *stepRun) succeed(env envelope.Envelope, inputsSHA string) *wfapi.RunToolResult {
	res := &wfapi.RunToolResult{Envelope: env, Attempt: r.attempt, InputsSHA256: inputsSHA}
	if raw, _ := json.Marshal(env.Data); len(raw) > MaxDataInHistory {
		storeData(res, r.recDir, raw)
	}
	if r.in.Step.Item == nil {
		if story := attemptStory(r.recDir, r.attempt, r.maxAttempts, r.began, "succeeded"); story != nil {
			res.Envelope.Feedback = append(res.Envelope.Feedback, *story)
		}
		if _, cut := envelope.Bounded(res.Envelope, ""); cut {
			res.EnvelopeFile = storeEnvelope(r.stepDir, res.Envelope)
		} else {
			res.EnvelopeFile = appendJournal(r.in.RunDir, r.in.Step.ID, res.Envelope)
		}
	}
	fit(res, r.stepDir, r.recDir)
	r.log.Debug("step succeeded", "duration_ms", env.DurationMS)
	return res
}

// DataFile is a stored output's name in its step's records.
const DataFile = "data.json"

// MaxResultPayload bounds a step's result in history: past it, its data
// travels by reference whatever its size (docs/limits.md).
const MaxResultPayload = 384 << 10

// storeData writes a step's data to data.json in its records (recDir)
// and puts a reference in its place.
func storeData(res *wfapi.RunToolResult, recDir string, raw []byte) {
	if os.MkdirAll(recDir, 0o755) != nil {
		return
	}
	p := filepath.Join(recDir, DataFile)
	if runfolder.WriteAtomic(p, raw) != nil {
		return
	}
	sum := sha256.Sum256(raw)
	res.DataFile, res.DataSHA256 = p, hex.EncodeToString(sum[:])
	res.Envelope.Data = map[string]any{"data_file": p, "bytes": len(raw)}
	res.Envelope.Feedback = append(res.Envelope.Feedback, envelope.Feedback{Phase: "output", Level: envelope.LevelInfo,
		Message: fmt.Sprintf("data (%d bytes) stored in %s and passed by reference", len(raw), p), Timestamp: envelope.Timestamp(envelope.Now())})
}

// fit bounds what a step's result carries into history, whatever the
// tool printed: the envelope cut to its limits (the whole one is kept in
// the step folder), then its data by reference when the result is still
// past MaxResultPayload.
func fit(res *wfapi.RunToolResult, stepDir, recDir string) {
	bounded, cut := envelope.Bounded(res.Envelope, res.EnvelopeFile)
	if cut && res.EnvelopeFile == "" {
		// An item keeps its envelope only when it had to be cut.
		res.EnvelopeFile = storeEnvelope(stepDir, res.Envelope)
		bounded, _ = envelope.Bounded(res.Envelope, res.EnvelopeFile)
	}
	res.Envelope = bounded
	if res.DataFile == "" && res.Envelope.Data != nil && envelope.Size(&res.Envelope) > MaxResultPayload {
		if raw, err := json.Marshal(res.Envelope.Data); err == nil {
			storeData(res, recDir, raw)
			res.Envelope, _ = envelope.Bounded(res.Envelope, res.EnvelopeFile)
		}
	}
	// JSON escapes (<, >, &, control bytes) can grow text sixfold: keep
	// the latest feedback entries until the encoded envelope fits.
	for fb := res.Envelope.Feedback; len(fb) > 1 && envelope.Size(&res.Envelope) > MaxResultPayload; fb = res.Envelope.Feedback {
		res.Envelope.Feedback = fb[len(fb)/2:]
	}
}

// EnvelopeSuffix names the file beside a step's folder that keeps its
// envelope (<run>/steps/<id>.envelope.json): the report reads it there
// when the workflow left it out. Beside, not in: a builtin step that
// touches no file has no folder, and one less folder a step is one of a
// fast step's largest costs.
const EnvelopeSuffix = ".envelope.json"

// envelopePath is where the envelope of the step (or item) whose folder
// is stepDir is kept.
func envelopePath(stepDir string) string { return filepath.Clean(stepDir) + EnvelopeSuffix }
