package runtimekit

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The tests seal records with a key of their own, not the user's, in a
// folder of this run's, removed after (a fixed name in /tmp had stayed
// there, shared by every run of the tests on the machine).
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "capflow-runtimekit-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = os.Setenv(OwnerKeyFile, filepath.Join(dir, "ownership.key"))
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
