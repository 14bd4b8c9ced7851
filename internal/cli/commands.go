package cli

import (
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/suggest"
)

// failuresAsEnvelopes wraps every command body once: an error it returns
// becomes the command's failure envelope, with the contract code the error
// carries and the command path as its id (capflow-plan-check). Bodies then
// simply return their errors.
func (a *App) failuresAsEnvelopes(c *cobra.Command) {
	if body := c.RunE; body != nil {
		id := toolID(c)
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if err := body(cmd, args); err != nil {
				a.set(failEnv(id, err, nil), nil)
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		a.failuresAsEnvelopes(sub)
	}
}

// nested suggests a group's subcommand of that name one level down
// ("check" is "plan check"), as (did you mean "plan check"?); "" for none.
func nested(cmd *cobra.Command, name string) string {
	var found []string
	for _, g := range cmd.Commands() {
		if !g.IsAvailableCommand() {
			continue
		}
		for _, c := range g.Commands() {
			if c.IsAvailableCommand() && (c.Name() == name || slices.Contains(c.Aliases, name)) {
				found = append(found, `"`+g.Name()+" "+c.Name()+`"`)
			}
		}
	}
	if len(found) == 0 {
		return ""
	}
	return " (did you mean " + strings.Join(found, " or ") + "?)"
}

// groupRun makes a command group reject unknown subcommands (cobra would
// print help and exit 0); a bare group is a usage error, exit 2, in every
// output (as go's own groups are): its help goes to stderr first in
// pretty output.
func (a *App) groupRun(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		var names []string
		for _, c := range cmd.Commands() {
			if c.IsAvailableCommand() {
				names = append(names, c.Name())
				names = append(names, c.Aliases...)
			}
		}
		hint := suggest.Phrase(args[0], names)
		if hint == "" {
			hint = nested(cmd, args[0])
		}
		return caperr.New(caperr.InvalidInput, "unknown command %q for %q%s (see --help)", args[0], cmd.CommandPath(), hint)
	}
	var subs []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			subs = append(subs, c.Name())
		}
	}
	if !a.jsonOutput() {
		cmd.SetOut(a.Stderr)
		_ = cmd.Help()
	}
	return caperr.New(caperr.InvalidInput, "%s needs a subcommand: %s", cmd.CommandPath(), strings.Join(subs, ", "))
}

// cobraArgCount is cobra's word on a command given too many or too few
// arguments.
var cobraArgCount = regexp.MustCompile(`^(accepts|requires) .*arg\(s\)`)

// cobraUnknown is cobra's unknown command with no suggestion of its own.
var cobraUnknown = regexp.MustCompile(`^unknown command "([^"]+)" for "[^"]+"$`)

// cobraSuggestion is cobra's multi-line "did you mean" for a root command.
var cobraSuggestion = regexp.MustCompile(`\s*Did you mean this\?\s+(\S+)(?:\s+\S+)*\s*$`)
