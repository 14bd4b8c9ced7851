package cli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	capflowclient "github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/wfapi"
)

// Shell completion (capflow completion bash|zsh|fish): a run's ID from the
// server's recent runs, a waiting step of that run, a tool's name or uid.
// Each asks with a short deadline and completes nothing when it cannot.

// completion is attached by the commands' usage: "... ID", "... ID
// STEP", and tools show|run.
func (a *App) completion(c *cobra.Command) {
	for _, sub := range c.Commands() {
		a.completion(sub)
	}
	if c.ValidArgsFunction != nil {
		return
	}
	words := strings.Fields(c.Use)
	switch {
	case len(words) >= 2 && words[1] == "ID":
		stepToo := len(words) >= 3 && words[2] == "STEP"
		c.ValidArgsFunction = func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			switch {
			case len(args) == 0:
				return a.recentRuns(), cobra.ShellCompDirectiveNoFileComp
			case len(args) == 1 && stepToo:
				return a.waitingSteps(args[0]), cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
	case c.Parent() != nil && c.Parent().Name() == "tools" && (words[0] == "show" || words[0] == "run"):
		c.ValidArgsFunction = func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return a.toolNames(), cobra.ShellCompDirectiveNoFileComp
		}
	}
}

// completing is the server's deadline for a completion.
const completing = 2 * time.Second

func (a *App) recentRuns() []string {
	var out []string
	_ = a.completingClient(func(ctx context.Context, tc *capflowclient.Client) {
		runs, err := tc.List(ctx, "", 50)
		if err != nil {
			return
		}
		for _, r := range runs {
			out = append(out, r.ID+"\t"+r.Plan+" · "+r.Status)
		}
	})
	return out
}

func (a *App) waitingSteps(id string) []string {
	var out []string
	_ = a.completingClient(func(ctx context.Context, tc *capflowclient.Client) {
		p, err := tc.Get(id).Progress(ctx)
		if err != nil {
			return
		}
		for _, s := range p.Steps {
			if s.Status == wfapi.StepWaiting && s.Waiting != nil {
				out = append(out, s.ID+"\t"+s.Waiting.Prompt)
			}
		}
	})
	return out
}

func (a *App) toolNames() []string {
	_, reg, err := a.loadRegistry()
	if err != nil {
		return nil
	}
	var out []string
	for _, m := range reg.Tools {
		out = append(out, m.Name+"\t"+strings.Join(m.Capabilities, ", "), m.Origin()+"/"+m.Name)
	}
	return out
}

func (a *App) completingClient(f func(context.Context, *capflowclient.Client)) error {
	ctx, cancel := context.WithTimeout(a.ctx, completing)
	defer cancel()
	_, tc, err := a.dial(ctx)
	if err != nil {
		return err
	}
	defer tc.Close()
	f(ctx, tc)
	return nil
}
