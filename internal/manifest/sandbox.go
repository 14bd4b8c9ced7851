package manifest

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Sandbox is a manifest's `sandbox:` block (docs/sandbox.md): what the
// tool needs beyond the default confinement. Unset fields keep the
// defaults.
type Sandbox struct {
	Network  bool     `json:"network,omitempty"`
	Read     []string `json:"read,omitempty"`
	Write    []string `json:"write,omitempty"`
	Memory   Size     `json:"memory,omitempty"`
	Pids     int      `json:"pids,omitempty"`
	CPU      Duration `json:"cpu,omitempty"`
	FileSize Size     `json:"file_size,omitempty"`
}

// Size is a number of bytes written as 4096, 512MiB, 1GiB or 2GB.
type Size int64

var sizeRE = regexp.MustCompile(`^([0-9]+)\s*(B|KiB|MiB|GiB|TiB|KB|MB|GB|TB)?$`)

var sizeUnits = map[string]int64{"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
	"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}

// ParseSize reads a size.
func ParseSize(s string) (Size, error) {
	m := sizeRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("%q is not a size like 512MiB or 2GiB", s)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	u := sizeUnits[m[2]]
	if err != nil || n <= 0 || n > (1<<62)/u {
		return 0, fmt.Errorf("%q is not a size between 1 byte and 4 EiB", s)
	}
	return Size(n * u), nil
}

// UnmarshalJSON reads a size string (or a plain number of bytes).
func (z *Size) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := ParseSize(s)
	*z = v
	return err
}

// sandboxChecks reports positioned problems of a `sandbox:` block: sizes
// that do not parse, write paths that leave the project.
func sandboxChecks(raw map[string]any, at func(path []string, format string, args ...any), protected []string) {
	sb, ok := raw["sandbox"].(map[string]any)
	if !ok {
		return
	}
	for _, k := range []string{"memory", "file_size"} {
		// The schema reports what is no size at all; this, a size too large.
		if s, ok := sb[k].(string); ok && sizeRE.MatchString(strings.TrimSpace(s)) {
			if _, err := ParseSize(s); err != nil {
				at([]string{"sandbox", k}, "%v", err)
			}
		}
	}
	list, _ := sb["write"].([]any)
	for i, w := range list {
		s, _ := w.(string)
		if s == "step" {
			continue
		}
		clean := filepath.Clean(s)
		switch {
		case filepath.IsAbs(s) || clean == ".." || strings.HasPrefix(clean, "../"):
			at([]string{"sandbox", "write", strconv.Itoa(i)}, "write %q: only \"step\" or a path inside the project (relative to its root)", s)
		case clean == ".":
			at([]string{"sandbox", "write", strconv.Itoa(i)}, "write %q would make the whole project writable (its policy, tools and run records): name a folder inside it", s)
		case Shelters(protected, clean) != "":
			at([]string{"sandbox", "write", strconv.Itoa(i)}, "write %q would let the tool change %s, which the engine trusts or runs unconfined: name a folder of the tool's own output", s, Shelters(protected, clean))
		}
	}
}

// Protected are the project's paths no tool may write (docs/sandbox.md):
// the engine's state and runs (under .capflow by default), the tools and
// kits it runs, its configuration and policy, and the repository.
var Protected = []string{".capflow", "tools", "kits", "capflow.yaml", "policy.yaml", ".git"}

// Shelters names the path of protected (relative to the project) that
// the write folder w (relative to it too) is, lies in or holds; "" when
// none.
func Shelters(protected []string, w string) string {
	w = filepath.Clean(w)
	for _, p := range protected {
		p = filepath.Clean(p)
		if w == p || strings.HasPrefix(w, p+"/") || strings.HasPrefix(p, w+"/") {
			return p
		}
	}
	return ""
}
