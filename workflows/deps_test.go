package workflows

import (
	"os/exec"
	"strings"
	"testing"
)

// Workflow code runs no tool, process, child process or file operation
// (docs/architecture.md): it does not even link the packages that do.
func TestWorkflowCodeLinksNoToolRunner(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range []string{"jq", "sandbox", "builtin", "toolrun", "runtimekit", "mcpclient", "artifacts", "cache", "beneath", "procfs", "preflight"} {
			if pkg == "github.com/capflow/capflow/internal/"+banned {
				t.Errorf("the workflows package depends on %s", pkg)
			}
		}
	}
}
