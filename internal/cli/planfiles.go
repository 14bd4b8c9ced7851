package cli

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/suggest"
	"github.com/capflow/capflow/internal/yamldoc"
)

// readPlanFile reads a plan file; a missing one is named with the plan
// file nearest in spelling, if any ("plans/exampels/x.yaml" → did you
// mean "plans/examples/x.yaml"?).
func readPlanFile(file string) ([]byte, error) {
	data, err := yamldoc.ReadFile(file, file)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return data, err
	}
	if phrase := suggest.Phrase(file, yamlFilesNear(file)); phrase != "" {
		return nil, caperr.New(caperr.InvalidInput, "%s does not exist%s", file, phrase).At(file, 0, 0, "")
	}
	return nil, err
}

// yamlFilesNear lists the YAML files under the nearest folder of file
// that exists (at most 2,000, four levels down), as file would name them.
func yamlFilesNear(file string) []string {
	dir := filepath.Dir(file)
	for dir != "." && dir != "/" {
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			break
		}
		dir = filepath.Dir(dir)
	}
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || len(out) >= 2000 {
			return filepath.SkipDir
		}
		if d.IsDir() && p != dir && (strings.HasPrefix(d.Name(), ".") || strings.Count(filepath.ToSlash(p), "/")-strings.Count(filepath.ToSlash(dir), "/") > 4) {
			return filepath.SkipDir
		}
		if ext := filepath.Ext(p); !d.IsDir() && (ext == ".yaml" || ext == ".yml") {
			out = append(out, p)
		}
		return nil
	})
	return out
}
