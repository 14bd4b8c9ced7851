package wire

import (
	"os/exec"
	"strings"
	"testing"
)

// The domain packages link nothing of Temporal: they speak wire, which
// imports nothing of it, and client (which talks to Temporal) re-exports
// wire's types for Go services (issue 55: dag, preflight and step linked 58
// Temporal packages through client).
func TestDomainLinksNoTemporal(t *testing.T) {
	pkgs := []string{"wire", "internal/dag", "internal/plan", "internal/gap", "internal/envelope", "internal/policy",
		"internal/preflight", "internal/step", "internal/verdict", "internal/wfapi", "internal/whatnext", "internal/report"}
	for _, p := range pkgs {
		out, err := exec.Command("go", "list", "-deps", "github.com/capflow/capflow/"+p).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", p, err, out)
		}
		var temporal []string
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "go.temporal.io/") {
				temporal = append(temporal, dep)
			}
		}
		if len(temporal) > 0 {
			t.Errorf("%s links %d Temporal packages (%s, ...): a domain package imports client, or something that does", p, len(temporal), temporal[0])
		}
	}
}
