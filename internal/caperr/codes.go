// Package caperr holds capflow's error codes (docs/errors.md) and the
// typed error that carries one, with the file position it refers to.
package caperr

import "sort"

// Code is a contract error code, e.g. SCHEMA_VIOLATION.
type Code string

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

// Severity of an error, highest first.
type Severity string

// Severities, from "cannot continue" to informative.
const (
	Critical Severity = "CRITICAL"
	High     Severity = "HIGH"
	Medium   Severity = "MEDIUM"
	Low      Severity = "LOW"
)

// Severities lists them most severe first.
var Severities = []Severity{Critical, High, Medium, Low}

// Rank orders severities, most severe first (0); an unknown one last.
func (s Severity) Rank() int {
	for i, x := range Severities {
		if x == s {
			return i
		}
	}
	return len(Severities)
}

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
