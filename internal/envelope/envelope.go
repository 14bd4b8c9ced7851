// Package envelope implements the uniform result envelope (contracts
// section 4) that every tool and every CLI command returns.
package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/wire"
)

// Feedback levels.
const (
	LevelInfo    = "info"
	LevelWarning = "warning"
	LevelError   = "error"
)

// The envelope's types are the wire's (docs/envelope.md): one definition
// from the tool that writes it to the client that reads it.
type (
	// Feedback is one event of a tool's or command's progress.
	Feedback = wire.Feedback
	// ErrorInfo is present only on failure; its Cause is the code behind a
	// summarising one (the last attempt's code of a step that ended
	// RETRY_EXHAUSTED).
	ErrorInfo = wire.ErrorInfo
	// Envelope is the result of one tool run or one CLI command.
	Envelope = wire.Envelope
)

// Now is the clock used for timestamps; tests replace it.
var Now = func() time.Time { return time.Now().UTC() }

// Timestamp formats t as RFC 3339 UTC with milliseconds.
func Timestamp(t time.Time) string { return t.UTC().Format(TimeFormat) }

// TimeFormat is the layout of every timestamp capflow writes.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// ErrorFor returns the ErrorInfo of a code from the table.
func ErrorFor(code caperr.Code) *ErrorInfo {
	i := caperr.Lookup(code)
	return &ErrorInfo{Code: code, Severity: i.Severity, Retryable: i.Retryable}
}

// Validate checks e against the contract's rules and returns every
// violation.
func Validate(e *Envelope) []string {
	var errs []string
	if e.ToolID == "" {
		errs = append(errs, "toolId is empty")
	}
	if (e.ExitCode == 0) != e.Success {
		errs = append(errs, fmt.Sprintf("exitCode %d contradicts success=%v (exitCode is 0 exactly when success)", e.ExitCode, e.Success))
	}
	if _, ok := ReadTime(e.Timestamp); !ok {
		errs = append(errs, fmt.Sprintf("timestamp %s is not RFC 3339", Quote(e.Timestamp)))
	}
	if e.Success && e.Error != nil {
		errs = append(errs, "error is present on success")
	}
	if !e.Success && !slices.ContainsFunc(e.Feedback, func(f Feedback) bool { return f.Level == LevelError }) {
		errs = append(errs, "a failure has no feedback entry with level error")
	}
	var prev time.Time
	for i, f := range e.Feedback {
		if len(errs) > maxValidateErrors {
			break
		}
		switch f.Level {
		case LevelInfo, LevelWarning, LevelError:
		default:
			errs = append(errs, fmt.Sprintf("feedback[%d].level %s is not info, warning or error", i, Quote(f.Level)))
		}
		t, ok := ReadTime(f.Timestamp)
		if !ok {
			errs = append(errs, fmt.Sprintf("feedback[%d].timestamp %s is not RFC 3339", i, Quote(f.Timestamp)))
			continue
		}
		if t.Before(prev) {
			errs = append(errs, fmt.Sprintf("feedback[%d] is earlier than the entry before it", i))
		}
		prev = t
	}
	if len(errs) > maxValidateErrors {
		errs = append(errs[:maxValidateErrors], "and more")
	}
	return errs
}

// maxValidateErrors bounds what Validate says of one envelope: a tool's 8
// MiB of bad entries made a 33 MB message (found attacking issue 57).
const maxValidateErrors = 10

// Quote is a value a message about an envelope names: quoted when short,
// else by its size (not its start: the message is masked later, and a cut
// secret would not be found whole).
func Quote(v string) string {
	if len(v) > 40 {
		return fmt.Sprintf("(%d bytes)", len(v))
	}
	return strconv.Quote(v)
}

// ReadTime reads an envelope's RFC 3339 time of at most 64 bytes (the
// parser takes any number of fractional digits: a 7 MiB timestamp was one).
func ReadTime(s string) (time.Time, bool) {
	if len(s) > 64 {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, s)
	return t, err == nil
}

// Required are the fields every envelope has (docs/envelope.md).
var Required = []string{"toolId", "exitCode", "success", "timestamp", "message", "feedback"}

// Parse decodes an envelope strictly: unknown top-level fields are
// tolerated (tools may add their own), but types must match and the
// contract's rules must hold. Numbers in data keep their precision.
func Parse(b []byte) (*Envelope, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) || errors.Is(err, io.ErrUnexpectedEOF) {
			// Not JSON at all: "not an object" sent a trial looking for braces.
			return nil, fmt.Errorf("not valid JSON: %w", err)
		}
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	var missing []string
	for _, k := range Required {
		if _, ok := raw[k]; !ok {
			missing = append(missing, strconv.Quote(k))
		}
	}
	switch len(missing) {
	case 0:
	case 1:
		return nil, fmt.Errorf("required field %s is missing", missing[0])
	default:
		// All at once: a tool's author fixes them in one go.
		return nil, fmt.Errorf("required fields %s are missing", strings.Join(missing, ", "))
	}
	var env Envelope
	dec = json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&env); err != nil {
		return nil, fmt.Errorf("field types do not match the envelope: %w", err)
	}
	if errs := Validate(&env); len(errs) > 0 {
		return nil, errors.New(joinErrs(errs))
	}
	if err := CheckData(env.Data); err != nil {
		return nil, err
	}
	return &env, nil
}

func joinErrs(errs []string) string {
	var b bytes.Buffer
	for i, e := range errs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e)
	}
	return b.String()
}

// MaxDataDepth is the deepest nesting a tool's data may have (a plan's
// YAML may nest 200 levels; readers such as Python's json stop near 1000).
const MaxDataDepth = 200

// CheckData says what in a tool's data (decoded with UseNumber) no reader
// keeps: a number past float64 (1e400 would turn into null), nesting past
// MaxDataDepth. The error names the first such field, keys in order, by its
// JSON pointer.
func CheckData(v any) error {
	if dataKept(v, 0) {
		return nil
	}
	segs, why := firstProblem(v, 0)
	ptr := ""
	for _, s := range slices.Backward(segs) {
		if len(s) > maxPointerSegment {
			// Named by its size, none of it shown: the message is not
			// redacted yet, and a cut secret would no longer be found.
			s = fmt.Sprintf("<a key of %d bytes>", len(s))
		}
		ptr += "/" + s
	}
	return fmt.Errorf("data%s: %s", orRoot(ptr), why)
}

// maxPointerSegment bounds each key a problem's pointer shows: a tool's
// key may be megabytes long; a longer one is named by its size.
const maxPointerSegment = 64

// dataKept is CheckData's answer without its message: it names nothing,
// so it sorts no keys and builds no pointer at each of millions of values
// (a tool's 8 MiB of data).
func dataKept(v any, depth int) bool {
	if depth > MaxDataDepth {
		return false
	}
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		return err == nil && !math.IsInf(f, 0) && !math.IsNaN(f)
	case map[string]any:
		for _, e := range x {
			if !dataKept(e, depth+1) {
				return false
			}
		}
	case []any:
		for _, e := range x {
			if !dataKept(e, depth+1) {
				return false
			}
		}
	}
	return true
}

// firstProblem is the first value, keys in order, that no reader keeps:
// the way to it, innermost first (each segment escaped once, on the way
// out: a pointer built on the way in copied its parent's at every value,
// 4.6 GB for 0.19 MiB of data under one long key, found attacking issue
// 57), and why; why is "" when there is none.
func firstProblem(v any, depth int) ([]string, string) {
	if depth > MaxDataDepth {
		return nil, fmt.Sprintf("nested deeper than %d levels", MaxDataDepth)
	}
	switch x := v.(type) {
	case json.Number:
		if f, err := x.Float64(); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Sprintf("%.40s is not a number a JSON reader keeps (past float64)", x.String())
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if segs, why := firstProblem(x[k], depth+1); why != "" {
				return append(segs, escapePointer(k)), why
			}
		}
	case []any:
		for i, e := range x {
			if segs, why := firstProblem(e, depth+1); why != "" {
				return append(segs, strconv.Itoa(i)), why
			}
		}
	}
	return nil, ""
}

func orRoot(ptr string) string {
	if ptr == "" {
		return " (the whole value)"
	}
	return " " + ptr
}

// escapePointer escapes a key for a JSON pointer (RFC 6901).
func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}
