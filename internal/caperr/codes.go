// Package caperr holds capflow's error codes (docs/errors.md) and the
// typed error that carries one, with the file position it refers to.
package caperr

import (
	"sort"

	"github.com/capflow/capflow/wire"
)

// Code is a contract error code, e.g. SCHEMA_VIOLATION: the wire's type,
// so an envelope is one type from the tool to the client.
type Code = wire.ErrorCode

// The contract's error codes.
const (
	ConfigError              Code = "CONFIG_ERROR"
	InvalidInput             Code = "INVALID_INPUT"
	SchemaViolation          Code = "SCHEMA_VIOLATION"
	ToolNotFound             Code = "TOOL_NOT_FOUND"
	DependencyUnavailable    Code = "DEPENDENCY_UNAVAILABLE"
	StartupError             Code = "STARTUP_ERROR"
	ReadinessTimeout         Code = "READINESS_TIMEOUT"
	TaskTimeout              Code = "TASK_TIMEOUT"
	TestFailure              Code = "TEST_FAILURE"
	ToolFailure              Code = "TOOL_FAILURE"
	RetryExhausted           Code = "RETRY_EXHAUSTED"
	QuorumNotMet             Code = "QUORUM_NOT_MET"
	PolicyBlocked            Code = "POLICY_BLOCKED"
	ObservabilityError       Code = "OBSERVABILITY_ERROR"
	OwnershipValidationError Code = "OWNERSHIP_VALIDATION_ERROR"
	Cancelled                Code = "CANCELLED"
	InternalError            Code = "INTERNAL_ERROR"
	Rejected                 Code = "REJECTED"
	ResourceExhausted        Code = "RESOURCE_EXHAUSTED"
)

// Severity of an error, highest first (the wire's type; its Rank orders
// them).
type Severity = wire.Severity

// Severities, from "cannot continue" to informative.
const (
	Critical Severity = "CRITICAL"
	High     Severity = "HIGH"
	Medium   Severity = "MEDIUM"
	Low      Severity = "LOW"
)

// Severities lists them most severe first.
var Severities = wire.Severities

// Info is one row of the error-code table.
type Info struct {
	Code      Code     `json:"code"`
	Severity  Severity `json:"severity"`
	Retryable bool     `json:"retryable"`
	// ExitCode is the CLI exit status for a command that fails with this code.
	ExitCode    int    `json:"exit_code"`
	Description string `json:"description"`
}

// The one table; docs/errors.md mirrors it and a test keeps the two in step.
var table = []Info{
	{ConfigError, Critical, false, 2, "invalid or missing configuration (capflow.yaml, policy.yaml, kit.yaml)"},
	{InvalidInput, High, false, 2, "malformed manifest, plan, flag or request input"},
	{SchemaViolation, High, false, 2, "data does not match its JSON Schema (inputs, tool output, contract)"},
	{ToolNotFound, Critical, false, 3, "no tool provides the capability, or the pinned tool does not exist"},
	{DependencyUnavailable, High, true, 1, "a declared binary, environment variable or service is missing"},
	{StartupError, High, true, 1, "a tool or server process failed to start"},
	{ReadinessTimeout, High, true, 1, "a server did not become ready before its deadline"},
	{TaskTimeout, High, true, 1, "a step ran past its timeout or stopped heartbeating"},
	{TestFailure, High, false, 1, "a test or assertion run by a tool failed"},
	{ToolFailure, High, true, 1, "a tool failed or produced no valid result envelope"},
	{RetryExhausted, High, false, 1, "a step failed on every allowed attempt"},
	{QuorumNotMet, High, false, 1, "too few dependencies of a join succeeded"},
	{PolicyBlocked, Critical, false, 4, "the policy forbids the plan or one of its steps"},
	{ObservabilityError, Medium, true, 1, "logs, reports or artifacts could not be written"},
	{OwnershipValidationError, Critical, false, 1, "refused to signal a process the run does not own"},
	{Cancelled, Low, false, 5, "the run or step was cancelled"},
	{InternalError, Critical, false, 1, "an unexpected error inside capflow"},
	{Rejected, High, false, 1, "an approval was refused"},
	{ResourceExhausted, High, false, 1, "a step passed a resource limit (memory, processes, CPU time), naming it"},
}

var byCode = func() map[Code]Info {
	m := make(map[Code]Info, len(table))
	for _, i := range table {
		m[i.Code] = i
	}
	return m
}()

// Lookup returns the table row for c; unknown codes are treated as
// INTERNAL_ERROR's row with the code kept, so nothing is silently retryable.
func Lookup(c Code) Info {
	if i, ok := byCode[c]; ok {
		return i
	}
	i := byCode[InternalError]
	i.Code = c
	return i
}

// Known reports whether c is one of the contract's codes.
func Known(c Code) bool { _, ok := byCode[c]; return ok }

// All returns the table in contract order.
func All() []Info { return append([]Info(nil), table...) }

// NonRetryable lists the codes that must never be retried, sorted.
func NonRetryable() []string {
	var out []string
	for _, i := range table {
		if !i.Retryable {
			out = append(out, string(i.Code))
		}
	}
	sort.Strings(out)
	return out
}

// advice is what a person does about a failure with the code once its
// retries ran out; docs/errors.md mirrors it and a test keeps the two in
// step.
var advice = map[Code]string{
	ConfigError:              "fix the configuration file the message names, then run again",
	InvalidInput:             "the message names the input. Written in the plan: fix it there, then capflow run PLAN again (a rerun replays the plan it was given). A run input: capflow run PLAN --input NAME=VALUE again. From a file or an earlier step's output: fix that, then the command above",
	SchemaViolation:          "make the data match the schema the message names; capflow tools show TOOL prints the tool's schemas",
	ToolNotFound:             "activate a kit or add a tool that provides the capability (capflow tools list), or scaffold one",
	DependencyUnavailable:    "check the dependency the message names (a binary on PATH, an environment variable, a service the policy lets the run reach), then rerun",
	StartupError:             "read the stderr tail; capflow tools run TOOL runs the tool alone",
	ReadinessTimeout:         "read the server's log; raise the readiness timeout (the step's readiness.timeout) if it is only slow",
	TaskTimeout:              "raise the step's timeout (timeout: in the plan, timeouts.start_to_close in tool.yaml) if the work is only slow, or find what it waited on in its last feedback",
	TestFailure:              "read the failed tests in the stderr tail and the step's feedback",
	ToolFailure:              "read the stderr tail; capflow tools run TOOL --inputs-file FILE runs the tool alone on the same input",
	RetryExhausted:           "every attempt failed: fix what the last attempt's error names, or raise retry: {max_attempts} if it is transient",
	QuorumNotMet:             "fix the join's failed dependencies, or lower its quorum",
	PolicyBlocked:            "change the plan, or policy.yaml if the project should allow it (capflow plan check PLAN names each rule)",
	ObservabilityError:       "check the free space and permissions of the runs folder and the artifact store",
	OwnershipValidationError: "nothing to undo: capflow refused to signal a process the run does not own",
	Cancelled:                "rerun the run to start it again",
	InternalError:            "a capflow bug: the worker's log has the detail; report it with the run's report.json",
	Rejected:                 "an approver refused the step: rerun when it should go ahead",
	ResourceExhausted:        "raise the limit the message names (tool.yaml limits, or the policy), or give the step less work (the evaluators' 30 s and 256 MiB are fixed: less work)",
}

// Advice is what to do about a failure with code c ("" for an unknown
// code).
func Advice(c Code) string { return advice[c] }
