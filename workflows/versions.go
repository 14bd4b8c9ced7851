package workflows

import (
	"cmp"

	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/workflows/limit"
)

// Every change of workflow code that runs recorded before it must replay
// as they ran (sdk-go's internal_flags.go is the model). A change is one
// GetVersion ID, declared here and nowhere else; Changes says what each
// version changed and which recorded histories (testdata/histories) took
// its latest version. versions_test.go fails for a GetVersion ID not
// declared here, for a change without a recorded history, and unless
// each history, altered to say it ran before the change, fails replay.
//
// To change workflow code: add a constant and a Change, branch on
// versionOf(ctx, id), record a run that takes the new branch (make
// record-histories; a label is added when the name is taken) and list it
// here. A change in baseline1 is frozen at its version there: a new
// version of it is a new change.
const (
	changeLocal          = "local-activities"
	changeTrustedInput   = "trusted-input"
	changeSegmentBlobs   = "segment-blobs"
	changeDeadline       = "deadline-clamp"
	changeCancelGrace    = "cancel-grace"
	changeSpillInputs    = "spill-inputs"
	changeChildInputs    = "child-inputs"
	changeBlobGroups     = "blob-part-groups"
	changeRehomeStore    = "rehome-from-store"
	changeRehomeDeps     = "rehome-dependencies"
	changeInlineActivity = "inline-local-activity"
	changeBaseline       = "baseline"
	changeItemHosts      = "item-host-move"
	changeSilentHost     = "silent-host-move"
	changeEagerSteps     = "eager-steps"
	changeLimitTrust     = limit.ChangeTrust
	changeLocalBackoff   = "local-backoff"
	changeBaseline2      = "baseline-2"
	changeBaseline3      = "baseline-3"
	changeBaseline4      = "baseline-4"
)

// Change is one declared change of workflow code.
type Change struct {
	ID string
	// Max is the latest version; Versions says what each one changed.
	Max      workflow.Version
	Versions []string
	// Histories are recorded runs that took a version of the change, each
	// altered by the replay test to say it took the version before.
	Histories []History
	// Uncovered, when set, says why no recorded run can show the latest
	// version's difference (the replay test lists it).
	Uncovered string
}

// History is a recorded run (testdata/histories) and the version of a
// change it took.
type History struct {
	File    string
	Version workflow.Version
}

// Changes are every change of workflow code, oldest first.
var Changes = []Change{
	{changeLocal, 1, []string{"steps whose tool runs as a local activity, and Resolve, Route and Finalize, run as local activities"},
		[]History{{"local-steps.json", 1}}, ""},
	{changeTrustedInput, 1, []string{"a client's input is {plan | plan_file | request, inputs, reuse}; the engine's carry only continues its own run"},
		[]History{{"refused-input.json", 1}}, ""},
	{changeSegmentBlobs, 1, []string{"a segment's carry is stored as a blob in the run folder and referenced by digest"},
		[]History{{"segments-first.segment-blobs.json", 1}}, ""},
	{changeDeadline, 2, []string{"steps' timeouts are clamped to what is left of max_run_seconds; the run checks its deadline after local steps (timeouts: a replay does not compare them)",
		"past the deadline, nothing goes on from a local attempt as a regular activity"},
		[]History{{"deadline-local.v2.json", 2}}, ""},
	{changeCancelGrace, 2, []string{"a halted step gets CancelGrace to confirm its cancellation",
		"only a tool's activity in flight is timed (not a step between its evaluation and its start, nor a sub-plan's child)"},
		[]History{{"cancel-grace.json", 1}}, "version 2 differs from 1 only for a step cancelled between its evaluation and its start, or a sub-plan's: no recorded run has one"},
	{changeSpillInputs, 1, []string{"a step's inputs past MaxInputBytes travel as a blob reference"},
		[]History{{"spill-inputs.json.gz", 1}}, ""},
	{changeChildInputs, 1, []string{"a sub-plan's inputs past MaxInputBytes travel as a blob reference"},
		[]History{{"child-inputs.json.gz", 1}}, ""},
	{changeBlobGroups, 1, []string{"a blob's parts are sent partsInFlight at a time (a 33-part checkpoint passed the 4 MB task completion)"},
		// Recorded from TestLargeInputsTravelByReference with six 220 KB
		// producers read by one step (a 6-part input blob), commit 97ca44c.
		[]History{{"blob-part-groups.json.gz", 1}}, ""},
	{changeRehomeStore, 1, []string{"with a shared store, a moved step reads its dependencies' files from the store instead of running them again"},
		[]History{{"host-lost-store.json", 1}}, "without it a moved step's dependencies run again only under rehome-dependencies, which this run never asked: the two paths differ only in runs that record both"},
	{changeRehomeDeps, 1, []string{"a step whose dependencies' files were on a lost host waits for them to run again on this host"},
		[]History{{"host-lost-rehome.json", 1}}, ""},
	{changeInlineActivity, 1, []string{"a batch of inline steps runs as one local activity, not in a SideEffect inside the workflow task"},
		[]History{{"inline-steps.inline-activity.json", 1}}, ""},
	{changeBaseline, 1, []string{"a new run takes every change above at its version in baseline1 without asking: one Version marker and one TemporalChangeVersion upsert a run, not one per change (issue 40)"},
		[]History{{"baseline.json", 1}}, ""},
	{changeItemHosts, 1, []string{"an idempotent for_each item whose host was lost follows the run to another host (it failed; the soak found it, issue 41)"},
		[]History{{"host-lost-items.json", 1}}, ""},
	{changeSilentHost, 1, []string{"an idempotent step or item on the run's host whose last attempt ended because nothing there heartbeated follows the run to another host, as for a schedule-to-start timeout (a stopped host's open polls took its retries; the soak found it, issue 41)"},
		[]History{{"host-silent.json", 1}}, ""},
	{changeEagerSteps, 1, []string{"with temporal.eager_steps, a step for the run's host makes its first attempt on the workflow's own queue, which the server may start on the worker that completed the workflow task; refused on another host, it goes on on the host's queue (issue 40)"},
		[]History{{"eager-steps.json", 1}}, ""},
	{changeLimitTrust, 1, []string{"a limit keeps leases within MinLimitLease..MaxLimitLease, only tightens its settings while it runs, and a renewal makes a holder only of one whose lease ran out (a client's renewal of a holder never granted is ignored; issue 53)"},
		[]History{{"limit-concurrency.limit-trust.json", 1}}, "version 1 differs from the default only for messages no attempt of capflow's sends (a lease past MaxLimitLease, a renewal of a holder never granted, a request loosening the limit): no recorded run has one"},
	{changeLocalBackoff, 1, []string{"a step whose local attempts failed waits the back-off its retry policy gives after them before it goes on as a regular activity, whose intervals go on from there (it started at once, from the first interval; issue 54)"},
		[]History{{"local-backoff.json", 1}}, ""},
	{changeBaseline2, 1, []string{"a new run takes every change above at its latest version without asking (baseline2), and starts its max_run_seconds timer and upserts its running status only once it may wait outside its workflow task: a run whose steps all end in local activities records neither; a run that carries another status than the one it ends with (package client's start with running) upserts it at its end, also where it ends before its steps run; a sub-plan's child run starts with running (issue 57)"},
		[]History{{"baseline-2.json", 1}}, ""},
	{changeBaseline3, 1, []string{"a new run takes every change above at its latest version without asking (baseline3), and a batch of inline steps also evaluates the idempotent inline steps that follow it (wfapi.InlineFollow): a step that then starts with the input one was evaluated with takes its outcome, with no local activity of its own, so a chain of inline steps is one marker (issue 57)"},
		[]History{{"baseline-3.json", 1}}, ""},
	{changeBaseline4, 1, []string{"a new run takes every change above at its latest version without asking (baseline4), and Resolve also evaluates the inline steps the run starts with and those that follow them, as a batch evaluates its followers: a run whose steps are all pure inline builtins records no RunInline marker (issue 57)"},
		[]History{{"baseline-4.json", 1}}, ""},
}

// baseline1 is the version of each change a run begun at baseline 1
// takes without asking for it: every change declared before the
// baseline, at its latest version then. Each GetVersion a new run asks
// records a marker and, in the Go SDK, upserts TemporalChangeVersion (a
// visibility write on the server): a plain run asked three or four.
var baseline1 = map[string]workflow.Version{
	changeLocal: 1, changeTrustedInput: 1, changeSegmentBlobs: 1, changeDeadline: 2, changeCancelGrace: 2,
	changeSpillInputs: 1, changeChildInputs: 1, changeBlobGroups: 1, changeRehomeStore: 1, changeRehomeDeps: 1,
	changeInlineActivity: 1,
}

// baseline2 is baseline1 for a run begun at baseline 2: every change of
// this workflow declared before it, at its latest version (the limit
// workflow's changes are its own).
var baseline2 = map[string]workflow.Version{
	changeLocal: 1, changeTrustedInput: 1, changeSegmentBlobs: 1, changeDeadline: 2, changeCancelGrace: 2,
	changeSpillInputs: 1, changeChildInputs: 1, changeBlobGroups: 1, changeRehomeStore: 1, changeRehomeDeps: 1,
	changeInlineActivity: 1, changeItemHosts: 1, changeSilentHost: 1, changeEagerSteps: 1, changeLocalBackoff: 1,
}

// baseline3 is baseline2 for a run begun at baseline 3: every change
// declared before it, baseline 2's own included, at its latest version.
var baseline3 = map[string]workflow.Version{
	changeLocal: 1, changeTrustedInput: 1, changeSegmentBlobs: 1, changeDeadline: 2, changeCancelGrace: 2,
	changeSpillInputs: 1, changeChildInputs: 1, changeBlobGroups: 1, changeRehomeStore: 1, changeRehomeDeps: 1,
	changeInlineActivity: 1, changeItemHosts: 1, changeSilentHost: 1, changeEagerSteps: 1, changeLocalBackoff: 1,
	changeBaseline2: 1,
}

// baseline4 is baseline3 for a run begun at baseline 4, baseline 3's own
// change included.
var baseline4 = map[string]workflow.Version{
	changeLocal: 1, changeTrustedInput: 1, changeSegmentBlobs: 1, changeDeadline: 2, changeCancelGrace: 2,
	changeSpillInputs: 1, changeChildInputs: 1, changeBlobGroups: 1, changeRehomeStore: 1, changeRehomeDeps: 1,
	changeInlineActivity: 1, changeItemHosts: 1, changeSilentHost: 1, changeEagerSteps: 1, changeLocalBackoff: 1,
	changeBaseline2: 1, changeBaseline3: 1,
}

// versionOf is the version of change id this run takes: the latest
// baseline's for a run begun at one. Baseline 4 is asked first in every
// new run; a run recorded before it has no marker of it, so a replay
// reads Default there and goes on to baseline 3, 2, then 1, and a run
// recorded before those asks each change as it did.
func versionOf(ctx workflow.Context, id string) workflow.Version {
	if v, ok := baseline4[id]; ok && workflow.GetVersion(ctx, changeBaseline4, workflow.DefaultVersion, 1) >= 1 {
		return v
	}
	if v, ok := baseline3[id]; ok && workflow.GetVersion(ctx, changeBaseline3, workflow.DefaultVersion, 1) >= 1 {
		return v
	}
	if v, ok := baseline2[id]; ok && workflow.GetVersion(ctx, changeBaseline2, workflow.DefaultVersion, 1) >= 1 {
		return v
	}
	if v, ok := baseline1[id]; ok && workflow.GetVersion(ctx, changeBaseline, workflow.DefaultVersion, 1) >= 1 {
		return v
	}
	return workflow.GetVersion(ctx, id, workflow.DefaultVersion, maxVersion(id))
}

// maxVersion is a declared change's latest version.
func maxVersion(id string) workflow.Version {
	for _, c := range Changes {
		if c.ID == id {
			return c.Max
		}
	}
	panic("workflows: undeclared change " + id)
}

// profile is how a run's steps run: the settings the run recorded
// (wfapi.RunSettings), each with the workflow's default for runs recorded
// before it was, and the version answers asked where the workflow begins.
// It is built once a segment (or items batch), and decisions read it,
// never the recorded settings. Changes asked where they first matter
// (inline batches, eager steps, a local step's back-off) are asked by
// their ways: asking them here would move their markers in recorded runs.
type profile struct {
	local bool // changeLocal: steps marked local run as local activities
	// segmentEvents and segmentBytes: 0, never (segments.go).
	segmentEvents, segmentBytes               int
	itemBatch, localFlush, localAttempts      int
	inlineFlushBytes, inlineBatch, eagerSteps int
}

// newProfile is the profile of a run that recorded s and answered local.
func newProfile(s wfapi.RunSettings, local bool) profile {
	return profile{local: local, segmentEvents: s.SegmentEvents, segmentBytes: s.SegmentBytes,
		itemBatch: cmp.Or(s.ItemBatch, ItemBatch), localFlush: cmp.Or(s.LocalFlush, LocalFlush),
		localAttempts: cmp.Or(s.LocalAttempts, LocalAttempts), inlineFlushBytes: cmp.Or(s.InlineFlushBytes, wfapi.DefaultInlineFlushBytes),
		inlineBatch: cmp.Or(s.InlineBatch, wfapi.DefaultInlineBatch), eagerSteps: s.EagerSteps}
}

// outsideProfile are the recorded settings the profile leaves out, and
// where they are read (versions_test.go: every other one is in it).
var outsideProfile = map[string]string{
	"HostWait": "with the run's host queue, which moves with the run (onHost, hostWait)",
}
