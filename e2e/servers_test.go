package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
)

// connect starts the tests' own dev server, or, under make cluster-test
// (CAPFLOW_E2E_TEMPORAL_ADDRESS), uses the cluster's server.
func (h *harness) connect(tmp string) error {
	if addr := os.Getenv("CAPFLOW_E2E_TEMPORAL_ADDRESS"); addr != "" {
		h.address = addr
		c, err := client.Dial(client.Options{HostPort: addr, Namespace: "default"})
		h.client = c
		return err
	}
	// The dev server binds more ports than the frontend; a port that was
	// free when picked can be taken by then, so try a few.
	serverLog, err := os.Create(filepath.Join(tmp, "devserver.log"))
	if err != nil {
		return err
	}
	h.serverLog = serverLog
	for attempt := 1; ; attempt++ {
		h.address = freePort()
		if err = h.startServer(); err == nil {
			break
		}
		if attempt == 3 {
			b, _ := os.ReadFile(serverLog.Name())
			return fmt.Errorf("start dev server: %w\n%s", err, b)
		}
	}
	h.client = h.server.Client()
	return nil
}

// onCluster reports whether the tests run on make cluster-test's cluster
// (PostgreSQL, the Temporal server built from its module).
func onCluster() bool { return os.Getenv("CAPFLOW_E2E_CLUSTER") == "1" }

// cluster runs scripts/cluster.sh (kill, stop or start a component of
// make cluster-test's cluster).
func (h *harness) cluster(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(h.repo, "scripts", "cluster.sh"), args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cluster.sh %v: %v\n%s", args, err, out)
	}
}

// projectCopy is a copy of the test project in a folder of the test's.
func projectCopy(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := copyTree(h.project, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startServer starts the dev server on h.address with the run's database
// file, so a restart finds every workflow where it was.
func (h *harness) startServer() error {
	args, err := devServerArgs(h.repo)
	if err != nil {
		return err
	}
	h.server, err = testsuite.StartDevServer(context.Background(), testsuite.DevServerOptions{
		ExistingPath:  h.temporalBin,
		ClientOptions: &client.Options{HostPort: h.address, Namespace: "default"},
		LogLevel:      "error",
		Stdout:        h.serverLog, Stderr: h.serverLog,
		DBFilename: filepath.Join(h.tmp, "temporal.db"),
		ExtraArgs:  args,
	})
	return err
}

// devServerArgs are make dev's dev server settings (scripts/dev-server.args),
// unless CAPFLOW_E2E_DEV_SERVER=default asks for Temporal's defaults (the
// benchmarks compare paths on a default server) or gives flags of its own.
func devServerArgs(repo string) ([]string, error) {
	switch v := os.Getenv("CAPFLOW_E2E_DEV_SERVER"); {
	case v == "default":
		return nil, nil
	case strings.HasPrefix(v, "--"): // settings to measure: "--dynamic-config-value k=v ..."
		return strings.Fields(v), nil
	}
	b, err := os.ReadFile(filepath.Join(repo, "scripts/dev-server.args"))
	if err != nil {
		return nil, err
	}
	var args []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			args = append(args, strings.Fields(line)...)
		}
	}
	return args, nil
}

// allowNetwork adds network.allow entries to the project's policy.yaml
// until the test ends (none: leaves it as it is): the tests' servers are
// on this machine's loopback, which a run reaches only where its policy
// names it.
func allowNetwork(t *testing.T, dir string, allow ...string) {
	t.Helper()
	if len(allow) == 0 {
		return
	}
	f := filepath.Join(dir, "policy.yaml")
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	quoted := make([]string, len(allow))
	for i, a := range allow {
		quoted[i] = strconv.Quote(a)
	}
	t.Cleanup(func() { _ = os.WriteFile(f, b, 0o644) })
	more := append(append([]byte(nil), b...), []byte("network: {allow: ["+strings.Join(quoted, ", ")+"]}\n")...)
	if err := os.WriteFile(f, more, 0o644); err != nil {
		t.Fatal(err)
	}
}
