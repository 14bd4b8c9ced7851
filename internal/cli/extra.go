package cli

import "github.com/spf13/cobra"

// extraCommands are the commands added by later layers (plans, runs,
// routing); kept in one place so the root command stays small.
func (a *App) extraCommands() []*cobra.Command {
	cmds := []*cobra.Command{a.initCommand(), a.planCommand(), a.runCommand(), a.statusCommand(), a.cancelCommand(), a.reportCommand(), a.routeCommand(), a.agentCommand()}
	cmds = append(cmds, a.scheduleCommand(), a.codecServerCommand(), a.cacheCommand(), a.consoleCommand(), a.mcpCommand())
	return append(cmds, a.controlCommands()...)
}
