// Package seal is the worker's key and the seals made with it: an HMAC
// over a record that only capflow's own processes can make, so a record a
// confined tool could write (a run's processes.json, a cache entry in a
// store inside the project) proves it was written by capflow. The key
// lives outside every project and every sandbox hides it.
package seal

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"sync"
)

// KeyFile names the key's file (default: capflow/ownership.key in the
// user's configuration folder, created with mode 0600 on first use).
// Workers that share an artifact store share it too, or each reads the
// others' cache entries as misses.
const KeyFile = "CAPFLOW_OWNERSHIP_KEY_FILE"

var key = sync.OnceValues(loadKey)

// Ensure makes the key now if it is not there yet: a confined tool's
// sandbox hides it only if it exists when the sandbox is made.
func Ensure() { _, _ = key() }

// KeyPath is the key's file ("" when there is no configuration folder).
func KeyPath() string {
	if path := os.Getenv(KeyFile); path != "" {
		return path
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "capflow", "ownership.key")
}

func loadKey() ([]byte, error) {
	path := KeyPath()
	if path == "" {
		return nil, errors.New("no configuration folder for the ownership key ($HOME unset?)")
	}
	if b, err := os.ReadFile(path); err == nil && len(b) >= 32 {
		return b, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	text := []byte(hex.EncodeToString(k))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		// Another worker made it first: use theirs.
		b, rerr := os.ReadFile(path)
		if rerr == nil && len(b) >= 32 {
			return b, nil
		}
		return nil, err
	}
	defer f.Close()
	if _, err := f.Write(text); err != nil {
		return nil, err
	}
	return text, nil
}

// Of is the seal of data in its domain ("" when there is no key).
func Of(domain string, data []byte) string {
	k, err := key()
	if err != nil {
		return ""
	}
	mac := hmac.New(sha256.New, k)
	mac.Write([]byte(domain))
	mac.Write([]byte{0})
	mac.Write(data)
	return hex.EncodeToString(mac.Sum(nil))
}

// Check reports whether s is data's seal in its domain.
func Check(domain string, data []byte, s string) bool {
	want := Of(domain, data)
	return s != "" && want != "" && hmac.Equal([]byte(s), []byte(want))
}
