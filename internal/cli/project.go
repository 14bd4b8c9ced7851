package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/capflow/capflow/internal/config"
)

// findProject is the project a command run without --project works in:
// the nearest folder holding capflow.yaml, from the current one up (as git
// finds its repository), so a command run in plans/examples/ uses the
// project's tools and policy. With none, the current folder with the
// defaults, said in one line on stderr.
func (a *App) findProject() string {
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if st, err := os.Stat(filepath.Join(dir, config.FileName)); err == nil && st.Mode().IsRegular() {
			return dir
		}
		if filepath.Dir(dir) == dir {
			break
		}
	}
	fmt.Fprintf(a.Stderr, "no %s in %s or above: the defaults are used, with this folder as the project (--project names another)\n", config.FileName, wd)
	return wd
}
