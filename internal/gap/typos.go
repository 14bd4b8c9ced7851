package gap

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/suggest"
)

// ownProblems are the best candidate's refusals of a step as positioned
// problems when each is the plan's own value (a literal of the wrong
// type, an input the tool does not take, one it requires and the step
// does not give): a typo in the plan, not a missing tool. nil when any is
// about what another step returns (data flow: a gap).
func (c *checker) ownProblems(s *plan.Step, i int, best Refusal) caperr.Problems {
	var out caperr.Problems
	for _, is := range best.Issues {
		if !is.Own || !strings.HasPrefix(is.Path, "with.") {
			return nil
		}
		path := append([]string{"steps", strconv.Itoa(i)}, strings.Split(is.Path, ".")...)
		line, col := c.p.Pos(path...)
		msg := fmt.Sprintf("%s (tool %s)", is.Message, best.Tool)
		if is.Ref {
			msg = is.Message
		}
		if is.Key != "" {
			msg = fmt.Sprintf("%s takes no input %q%s", best.Tool, is.Key, suggest.Phrase(is.Key, is.Known))
			if suggest.Phrase(is.Key, is.Known) == "" {
				msg += " (it takes " + strings.Join(is.Known, ", ") + ")"
			}
		}
		out = append(out, caperr.New(caperr.InvalidInput, "%s", msg).At(c.p.File, line, col, fmt.Sprintf("steps[%d].%s", i, is.Path)))
	}
	return out
}
