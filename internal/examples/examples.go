// Package examples reads the promises the example plans (and the soak's
// plans) make in their "# expect: ..." comment, so tests hold them to it.
package examples

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// Promise is what a plan file says of itself in its "# expect:" line:
//
//	# expect: check=ready run=passed outputs.text=a-b steps.c=succeeded interrupted.count=TASK_TIMEOUT
//
// check and run are the statuses of `plan check` and of a run; outputs.NAME
// the text of an output (JSON for what is not a string); steps.ID a step's
// final state; interrupted.ID the error code step ID (a tool that is not
// idempotent) fails with when a fault cut its one attempt short, the run
// then failing there instead of ending as promised.
type Promise struct {
	Check, Run  string // "" when not said
	Outputs     map[string]string
	Steps       map[string]string
	Interrupted map[string]string
}

// Read returns the promise a plan file makes (zero when it makes none).
func Read(file string) (Promise, error) {
	p := Promise{Outputs: map[string]string{}, Steps: map[string]string{}, Interrupted: map[string]string{}}
	f, err := os.Open(file)
	if err != nil {
		return p, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		rest, ok := strings.CutPrefix(sc.Text(), "# expect: ")
		if !ok {
			continue
		}
		for _, kv := range strings.Fields(rest) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				continue // prose: "check=partial-complete without ffmpeg, ready with ffmpeg"
			}
			switch name, sub, _ := strings.Cut(k, "."); {
			case k == "check":
				p.Check = v
			case k == "run":
				p.Run = v
			case name == "outputs" && sub != "":
				p.Outputs[sub] = v
			case name == "steps" && sub != "":
				p.Steps[sub] = v
			case name == "interrupted" && sub != "":
				p.Interrupted[sub] = v
			default:
				return p, fmt.Errorf("%s:%d: expect: %q is not check=, run=, outputs.NAME=, steps.ID= or interrupted.ID=", file, line, kv)
			}
		}
	}
	return p, sc.Err()
}

// Expect returns the check and run statuses an example promises ("" when
// it does not say).
func Expect(file string) (check, run string, err error) {
	p, err := Read(file)
	return p.Check, p.Run, err
}

// NeedsFFmpeg reports whether an example's promise depends on ffmpeg
// ("check=partial-complete without ffmpeg, ready with ffmpeg"): such a plan
// is ready, and runs, only where ffmpeg is installed.
func NeedsFFmpeg(file string) bool {
	b, err := os.ReadFile(file)
	return err == nil && strings.Contains(string(b), "ready with ffmpeg")
}

// NeedsModel reports whether an example runs only against a language model
// ("run=passed with a model"): its cases script the model offline
// (capflow plan test), and the e2e suite drives agent steps against servers
// it starts (TestAgentSteps).
func NeedsModel(file string) bool {
	b, err := os.ReadFile(file)
	return err == nil && strings.Contains(string(b), "with a model")
}
