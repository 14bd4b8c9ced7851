package toolrun

import (
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/caperr"
)

// Whatever way a tool fails, its stderr's last lines are one feedback
// entry of phase stderr (what "what next" shows first), once (issue 54: a
// tool that exited without an envelope kept them in another entry's
// detail, and no tail was shown).
func TestEveryFailureCarriesItsStderrTail(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"no envelope":       `echo 'opening db' >&2; echo 'fatal: permission denied' >&2; exit 3`,
		"garbage":           `echo 'fatal: permission denied' >&2; echo '{not json'; exit 0`,
		"its own failure":   `echo 'fatal: permission denied' >&2; echo '{"toolId":"t","exitCode":1,"success":false,"timestamp":"2026-11-21T10:00:00Z","message":"no","feedback":[{"phase":"a","level":"error","message":"no","timestamp":"2026-11-21T10:00:00Z"}]}'; exit 1`,
		"success, exit 2":   `echo 'fatal: permission denied' >&2; echo '` + okEnvelope + `'; exit 2`,
		"timed out (stops)": `echo 'fatal: permission denied' >&2; sleep 30`,
	} {
		env := run(t, script(t, body), map[string]any{"n": 5}, 700*time.Millisecond)
		var tails []string
		for _, f := range env.Feedback {
			if f.Phase == "stderr" && f.Detail != "" {
				tails = append(tails, f.Detail)
			}
			if f.Phase != "stderr" && strings.Contains(f.Detail, "permission denied") {
				t.Errorf("%s: the tail is in %s's detail too: %+v", name, f.Phase, f)
			}
		}
		if env.Success || len(tails) != 1 || !strings.HasSuffix(tails[0], "fatal: permission denied") {
			t.Errorf("%s: stderr tails %q in %+v", name, tails, env)
		}
	}
}

// A tool that exits 0 without its envelope breaks the protocol every time:
// its failure is final; one that crashed (exit non-zero) may do better on
// another attempt (new-user trial of issue 54: the first was tried 3 times).
func TestNoEnvelopeAfterExitZeroIsFinal(t *testing.T) {
	t.Parallel()
	for body, retryable := range map[string]bool{`echo 'done!'; exit 0`: false, `echo 'segfault' >&2; exit 139`: true} {
		env := run(t, script(t, body), map[string]any{"n": 5}, 5*time.Second)
		if env.Success || env.Error == nil || env.Error.Code != caperr.ToolFailure || env.Error.Retryable != retryable {
			t.Errorf("%s: %+v", body, env.Error)
		}
	}
}
