package console

import (
	"bytes"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/beneath"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/gap"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/preflight"
	"github.com/capflow/capflow/internal/yamldoc"
)

// The project's plans: every YAML file with a top-level `steps`, checked
// as `plan check` checks it.

// skipDirs are folders no plan is looked for in.
var skipDirs = map[string]bool{".capflow": true, ".git": true, "node_modules": true, "kits": true, "tools": true, "testdata": true, "bin": true}

// MaxPlans bounds the plan files listed.
const MaxPlans = 500

// planFiles lists the project's plan files, as paths from its root.
// Each is read beneath the root (a regular file of at most a YAML
// document's bound: a FIFO or a huge file named *.yaml is passed over).
func (s *Server) planFiles() []string {
	root := s.o.Project.Root()
	dir, err := os.OpenRoot(root)
	if err != nil {
		return nil
	}
	defer dir.Close()
	var out []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || len(out) >= MaxPlans {
			return filepath.SkipDir
		}
		if d.IsDir() {
			if p != root && (skipDirs[d.Name()] || strings.HasPrefix(d.Name(), ".") || anotherProject(dir, root, p)) {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(p); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if raw, err := beneath.ReadIn(dir, rel, yamldoc.MaxFileSize, "plan", rel); err == nil && topLevel(raw, "steps") && topLevel(raw, "name") {
			out = append(out, rel)
		}
		return nil
	})
	slices.Sort(out)
	return out
}

// anotherProject: folder p (under root) holds a capflow.yaml of its own,
// so its plans are another project's (the soak's, in this repository).
func anotherProject(dir *os.Root, root, p string) bool {
	rel, _ := filepath.Rel(root, p)
	_, err := dir.Lstat(filepath.Join(rel, config.FileName))
	return err == nil
}

func (s *Server) listPlans(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, map[string]any{"plans": s.planFiles()})
}

// check checks a plan file of the project (a path from its root; nothing
// outside it).
func (s *Server) check(file string) (*plan.Plan, *preflight.Report, error) {
	if file == "" || !slices.Contains(s.planFiles(), filepath.Clean(file)) {
		return nil, nil, caperr.New(caperr.InvalidInput, "%q is not a plan file of the project (GET /api/plans lists them)", file)
	}
	proj := s.o.Project
	reg, err := proj.Registry()
	if err != nil {
		return nil, nil, err
	}
	pol, err := proj.Policy()
	if err != nil {
		return nil, nil, err
	}
	data, err := beneath.ReadFile(proj.Root(), filepath.Clean(file), yamldoc.MaxFileSize, "plan")
	if err != nil {
		return nil, nil, err
	}
	p, probs := proj.ParsePlan(file, data)
	if len(probs) > 0 {
		return nil, preflight.InvalidReport(file, probs), nil
	}
	return p, proj.Check(p, nil, reg, pol, true), nil
}

// checkPlan answers ?file='s preflight report (the JSON `plan check` prints).
func (s *Server) checkPlan(w http.ResponseWriter, r *http.Request) {
	_, rep, err := s.check(r.URL.Query().Get("file"))
	if err != nil {
		writeError(w, 0, err)
		return
	}
	writeJSON(w, rep)
}

// planSVG lays out ?file='s graph; the page marks its gaps and problems.
func (s *Server) planSVG(w http.ResponseWriter, r *http.Request) {
	p, rep, err := s.check(r.URL.Query().Get("file"))
	if err != nil {
		writeError(w, 0, err)
		return
	}
	if p == nil {
		writeError(w, http.StatusUnprocessableEntity, caperr.New(caperr.InvalidInput, "%s", rep.Message))
		return
	}
	g := GraphOfPlan(p, rep.Resolution)
	c := Collapse(g)
	if open := openable(expandParam(r), c.Groups); len(open) > 0 {
		c = Collapse(g, open...)
	}
	svg, err := SVG(r.Context(), c)
	if err != nil {
		writeError(w, http.StatusInternalServerError, caperr.Wrap(caperr.InternalError, err, "layout"))
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	_, _ = w.Write(svg)
}

// GraphOfPlan is a checked plan's graph: its steps with the tools they
// resolved to.
func GraphOfPlan(p *plan.Plan, res []gap.StepResolution) *client.Graph {
	tools := map[string]gap.StepResolution{}
	for _, r := range res {
		tools[r.StepID] = r
	}
	g := &client.Graph{Plan: p.Name, Steps: []client.GraphStep{}}
	for _, st := range p.Steps {
		gs := client.GraphStep{ID: st.ID, Capability: st.Capability, Deps: st.Deps, ForEach: st.IsForEach(), When: st.When, Plan: st.Plan,
			Tool: tools[st.ID].Tool, Version: tools[st.ID].Version}
		for _, d := range st.Deps {
			if !slices.Contains(st.Needs, d) {
				gs.Data = append(gs.Data, d)
			}
		}
		g.Steps = append(g.Steps, gs)
	}
	return g
}

// topLevel reports whether a YAML document has key at its top level (a
// plan has name and steps; a browser scenario only steps).
func topLevel(raw []byte, key string) bool {
	k := []byte(key + ":")
	return bytes.HasPrefix(raw, k) || bytes.Contains(raw, append([]byte("\n"), k...))
}
