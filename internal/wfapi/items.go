package wfapi

import (
	"fmt"

	"github.com/capflow/capflow/internal/caperr"
)

// The types of a for_each step's items and their batches (ItemsWorkflow).

// ItemCall names one item of a for_each step: its value when the workflow
// has the list in its history, or else the list's source and the index
// (the activity reads the stored list).
type ItemCall struct {
	ForEach  any    `json:"for_each,omitempty"`
	ItemName string `json:"item_name"`
	Index    int    `json:"index"`
	Value    any    `json:"value,omitempty"`
	HasValue bool   `json:"has_value,omitempty"`
}

// ItemsWorkflowType runs one batch of a large for_each step's items.
const ItemsWorkflowType = "ItemsWorkflow"

// ItemsInput is one batch of a for_each step's items.
type ItemsInput struct {
	WorkflowID string                 `json:"workflow_id"` // the run's (the items' run folder)
	RunDir     string                 `json:"run_dir"`
	HostQueue  string                 `json:"host_queue,omitempty"` // the run's host (ResolveResult.HostQueue)
	Step       ResolvedStep           `json:"step"`
	ForEach    any                    `json:"for_each,omitempty"` // set when items carry no values
	Inputs     map[string]any         `json:"inputs,omitempty"`
	Deps       map[string]StepOutcome `json:"deps,omitempty"`
	Items      []BatchItem            `json:"items"`
	// MaxParallel bounds the batch's items at once; StopAfterFailures
	// (-1: never) cancels the rest once more items failed.
	MaxParallel       int `json:"max_parallel"`
	StopAfterFailures int `json:"stop_after_failures"`
	// LocalFlush and LocalAttempts: the run's (ResolveResult).
	LocalFlush    int `json:"local_flush,omitempty"`
	LocalAttempts int `json:"local_attempts,omitempty"`
	// InlineFlushBytes: the run's (ResolveResult).
	InlineFlushBytes int `json:"inline_flush_bytes,omitempty"`
	InlineBatch      int `json:"inline_batch,omitempty"`
	// Lineage: the parent run's (RunToolInput.Lineage).
	Lineage string `json:"lineage,omitempty"`
	// Spilled: the batch's input would have passed MaxInputBytes; all of
	// it is this blob of the run folder (only WorkflowID and HostQueue are
	// set beside it), loaded and digest-checked by the batch.
	Spilled *Blob `json:"spilled,omitempty"`
}

// BatchItem is one item of a batch.
type BatchItem struct {
	Index    int  `json:"index"`
	Value    any  `json:"value,omitempty"`
	HasValue bool `json:"has_value,omitempty"`
}

// ItemsResult is a batch's outcome, item by item.
type ItemsResult struct {
	Items []ItemOutcome `json:"items"`
}

// ItemOutcome is one item's end.
type ItemOutcome struct {
	Index    int         `json:"index"`
	Status   StepState   `json:"status"`
	Attempts int         `json:"attempts,omitempty"`
	Reason   string      `json:"reason,omitempty"`
	Code     caperr.Code `json:"code,omitempty"`
	Data     any         `json:"data,omitempty"`
}

// ItemLabel is how an item appears in status, reports and the Web UI.
func ItemLabel(step string, index int) string { return fmt.Sprintf("%s[%d]", step, index) }
