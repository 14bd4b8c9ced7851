package runtimekit

import (
	"os"
	"path/filepath"
)

// The tests seal records with a key of their own, not the user's.
func init() {
	_ = os.Setenv(OwnerKeyFile, filepath.Join(os.TempDir(), "capflow-runtimekit-test-ownership.key"))
}
