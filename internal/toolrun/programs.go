package toolrun

import (
	"os"
	"os/exec"
	"strings"
	"sync"
)

// programs caches where PATH lookups found programs, by PATH and name:
// exec looks a bare name up in every PATH folder at each start.
var programs sync.Map

// lookPath is exec.LookPath, remembered; forget drops a remembered path
// that no longer starts.
func lookPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	key := os.Getenv("PATH") + "\x00" + name
	if p, ok := programs.Load(key); ok {
		return p.(string), nil
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", err
	}
	programs.Store(key, p)
	return p, nil
}

func forgetPath(name string) { programs.Delete(os.Getenv("PATH") + "\x00" + name) }
