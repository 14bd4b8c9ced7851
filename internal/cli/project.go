package cli

import (
	"fmt"
	"os"

	"github.com/capflow/capflow/internal/config"
)

// findProject is the project a command run without --project works in:
// the nearest folder holding capflow.yaml, from the current one up (as git
// finds its repository), so a command run in plans/examples/ uses the
// project's tools and policy. With none, the current folder with the
// defaults, said in one line on stderr.
func (a *App) findProject() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", nil
	}
	dir, found, err := config.FindProject(wd)
	if err != nil || found {
		return dir, err
	}
	fmt.Fprintf(a.Stderr, "no %s in %s or above: the defaults are used, with this folder as the project (--project names another; capflow init makes this one a project)\n", config.FileName, wd)
	return wd, nil
}
