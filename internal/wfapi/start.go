package wfapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/wire"
)

// Start is PlanWorkflow's argument: what a client sent (Input), or, when a
// run continues as new, the engine's own reference to its carry. It
// decodes any JSON without failing: what a client may not send is listed
// in Refused, and the workflow ends such a run before it reads, writes or
// runs anything (docs/workflow.md, "What a client may send").
type Start struct {
	Input
	// Carry is set by the engine when it continues as new: where the
	// previous segment stored its state, and that state's digest. A run
	// accepts it only as the continuation of an earlier run, and only when
	// the stored state matches the digest.
	Carry *CarryRef `json:"carry,omitempty"`
	// Resume is the inline carry of runs recorded before carries moved to
	// the run folder; only their replay accepts it.
	Resume *Resume `json:"resume,omitempty"`
	// ParentInputs is set by the engine when a sub-plan step's evaluated
	// inputs are too large to travel in the child's input: the blob in the
	// parent run's folder that holds them. A run accepts it only as a
	// child (its parent is the server's to say).
	ParentInputs *ParentInputs `json:"parent_inputs,omitempty"`
	// Lineage is set by the engine for a sub-plan's run: its parent's
	// lineage (RunToolInput.Lineage). Accepted only from a parent.
	Lineage string `json:"lineage,omitempty"`
	// Brief is set by an agent step for its round's run: the result keeps
	// each step's outcome only (Brief). Accepted only from a parent.
	Brief bool `json:"brief,omitempty"`
	// Refused lists the fields a client may not send, or sent malformed.
	Refused []wire.Problem `json:"-"`
}

// ParentInputs names a child run's inputs stored by its parent.
type ParentInputs struct {
	Blob
	// Host is the parent's host queue (where its folder is).
	Host string `json:"host,omitempty"`
}

// CarryRef names a segment's stored carry (a blob in the run folder).
type CarryRef struct {
	Blob
	Segment int `json:"segment"`
	// Host is the host queue that stored it (where it is loaded from).
	Host string `json:"host,omitempty"`
	// From is the run that stored it: the server's ContinuedExecutionRunID
	// of the run that accepts it.
	From string `json:"from"`
}

// clientFields are the fields of Input; engineFields are the engine's own.
var (
	clientFields = []string{"plan", "plan_file", "request", "inputs", "reuse"}
	engineFields = []string{"carry", "resume", "parent_inputs", "lineage", "brief"}
)

// UnmarshalJSON decodes a workflow input, never failing: unknown fields
// and fields of the wrong type are recorded in Refused (a decode error
// would fail every workflow task and leave the run stuck).
func (s *Start) UnmarshalJSON(b []byte) error {
	*s = Start{}
	if t := bytes.TrimSpace(b); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		s.refuse("", "the workflow input is not a JSON object")
		return nil
	}
	targets := map[string]any{
		"plan": &s.Plan, "plan_file": &s.PlanFile, "request": &s.Request, "inputs": &s.Inputs, "reuse": &s.Reuse,
		"carry": &s.Carry, "resume": &s.Resume, "parent_inputs": &s.ParentInputs, "lineage": &s.Lineage,
		"brief": &s.Brief,
	}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		raw := fields[name]
		dst, ok := targets[name]
		if !ok {
			s.refuse(name, fmt.Sprintf("unknown field %q: a client sends only %v", name, clientFields))
			continue
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			s.refuse(name, fmt.Sprintf("field %q: %s", name, typeError(err)))
		}
	}
	return nil
}

// maxRefused bounds the refusals a result lists (an input of 60,000
// unknown keys must not make a result past the payload limit).
const maxRefused = 20

func (s *Start) refuse(field, msg string) {
	if len(s.Refused) >= maxRefused {
		return
	}
	if len(field) > 100 {
		field = field[:100] + "…"
		msg = "a field name of more than 100 bytes"
	}
	s.Refused = append(s.Refused, wire.Problem{Field: field, Message: msg, Code: wire.ErrorCode(caperr.InvalidInput)})
}

// RefuseEngineFields records the engine's carry fields as refused: a
// client sent them (the run is not a continuation of an earlier one).
func (s *Start) RefuseEngineFields() {
	for _, f := range engineFields {
		if (f == "carry" && s.Carry != nil) || (f == "resume" && s.Resume != nil) {
			s.refuse(f, fmt.Sprintf("field %q is the engine's own (set when a run continues as new); a client sends only %v", f, clientFields))
		}
	}
	s.Carry, s.Resume = nil, nil
}

// RefuseParentInputs records parent_inputs and lineage as refused: the
// run has no parent, so a client sent them.
func (s *Start) RefuseParentInputs() {
	if s.ParentInputs != nil {
		s.refuse("parent_inputs", fmt.Sprintf("field %q is the engine's own (set when a sub-plan starts); a client sends only %v", "parent_inputs", clientFields))
	}
	if s.Lineage != "" {
		s.refuse("lineage", fmt.Sprintf("field %q is the engine's own (set when a sub-plan starts); a client sends only %v", "lineage", clientFields))
	}
	if s.Brief {
		s.refuse("brief", fmt.Sprintf("field %q is the engine's own (set when an agent step runs a round); a client sends only %v", "brief", clientFields))
	}
	s.ParentInputs, s.Lineage, s.Brief = nil, "", false
}

// Validate checks what decoding cannot: values a client sends that the
// workflow would otherwise trust.
func (s *Start) Validate() {
	if r := s.Reuse; r != nil && (r.WorkflowID == "" || len(r.WorkflowID) > 1000) {
		s.refuse("reuse.workflow_id", "reuse.workflow_id names the earlier run: 1 to 1000 characters")
	}
	if c := s.Carry; c != nil && !blobName.MatchString(c.Name) {
		s.refuse("carry.name", "not a carry the engine stored")
	}
	if p := s.ParentInputs; p != nil && (!blobName.MatchString(p.Name) || s.Inputs != nil) {
		s.refuse("parent_inputs.name", "not inputs the engine stored (and a run has its inputs one way)")
	}
}

func typeError(err error) string {
	if te, ok := err.(*json.UnmarshalTypeError); ok {
		return fmt.Sprintf("a JSON %s where %s is expected", te.Value, te.Type)
	}
	return err.Error()
}

// RefusedMessage is the run's message when its input was refused.
func RefusedMessage(refused []wire.Problem) string {
	return fmt.Sprintf("%s: the workflow input was refused, nothing was read, written or run: %s", caperr.InvalidInput, refused[0].Message)
}

// Blob is a value the engine stored in the run folder in parts, each small
// enough for one activity payload, and checked by its SHA-256 when read
// back (docs/limits.md): how checkpoints and carries stay under Temporal's
// payload limits whatever a plan's size.
type Blob struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	Size   int    `json:"size"`
	Parts  int    `json:"parts"`
}

// blobName: blobs are named by the engine (segment-N.json, carry-N.json):
// a name is never a path.
var blobName = regexp.MustCompile(`^[a-z]+-[0-9a-f]{1,64}\.json$`)

// ValidBlobName reports whether a blob name is one the engine gives.
func ValidBlobName(name string) bool { return blobName.MatchString(name) }

// BlobPartBytes is the largest part of a blob one activity carries (base64
// in JSON: about 342 KB, under the 512 KB every payload stays within).
const BlobPartBytes = 256 << 10

// Activity names of blobs.
const (
	PutBlobActivity = "PutBlob"
	GetBlobActivity = "GetBlob"
)

// PutBlobInput is one part of a blob; the last part (Seal set) also
// carries the blob's digest, and the worker joins the parts, checks the
// digest and keeps the whole as <run>/blobs/<name>. The run folder is the
// one of the activity's own workflow: never a path from the input.
type PutBlobInput struct {
	// Run is the run whose folder holds the blob ("": the activity's own
	// workflow; a for_each batch names its run).
	Run  string `json:"run,omitempty"`
	Name string `json:"name"`
	Part int    `json:"part"`
	Data []byte `json:"data"`
	Seal *Blob  `json:"seal,omitempty"`
}

// GetBlobInput asks for one part of a stored blob.
type GetBlobInput struct {
	Run  string `json:"run,omitempty"` // as in PutBlobInput
	Name string `json:"name"`
	Part int    `json:"part"`
	// SHA256 is the whole blob's digest: a worker that lacks the blob
	// (the run moved hosts) fetches it from a shared store.
	SHA256 string `json:"sha256,omitempty"`
}
