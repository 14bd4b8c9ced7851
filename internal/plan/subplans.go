package plan

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/yamldoc"
)

// LoadSubPlans loads the sub-plans of p's `plan:` steps (paths from the
// project root, which they may not leave), recursively, refusing cycles
// between plan files. Every problem is reported, positioned in the file
// that names the sub-plan.
func LoadSubPlans(p *Plan, root string) caperr.Problems {
	abs, _ := filepath.Abs(p.File)
	return loadSubs(p, root, []string{abs})
}

// LoadSubPlansOf is LoadSubPlans for a plan read from the file at abs
// (p.File being the name its problems show).
func LoadSubPlansOf(p *Plan, root, abs string) caperr.Problems {
	return loadSubs(p, root, []string{abs})
}

// InProject returns the file at rel, a path from the project root, when
// it is inside the project, symlinks followed; why it is not otherwise.
func InProject(root, rel string) (string, error) {
	rootAbs, _ := filepath.Abs(root)
	full := filepath.Clean(filepath.Join(rootAbs, rel))
	if filepath.IsAbs(rel) || (full != rootAbs && !strings.HasPrefix(full, rootAbs+string(filepath.Separator))) {
		return "", fmt.Errorf("%q must be a path inside the project", rel)
	}
	if real, err := filepath.EvalSymlinks(full); err == nil {
		realRoot, _ := filepath.EvalSymlinks(rootAbs)
		if real != realRoot && !strings.HasPrefix(real, realRoot+string(filepath.Separator)) {
			return "", fmt.Errorf("%q leads outside the project (through a symlink)", rel)
		}
	}
	return full, nil
}

func loadSubs(p *Plan, root string, stack []string) caperr.Problems {
	var probs caperr.Problems
	for i, s := range p.Steps {
		if s.Plan == "" {
			continue
		}
		at := func(format string, args ...any) {
			probs = append(probs, caperr.New(caperr.InvalidInput, format, args...).At(p.File, s.Line, 0, fmt.Sprintf("steps[%d].plan", i)))
		}
		full, err := InProject(root, s.Plan)
		if err != nil {
			at("sub-plan %v", err)
			continue
		}
		for _, f := range stack {
			if f == full {
				at("sub-plan %q includes itself: %s", s.Plan, cycleText(root, append(stack, full)))
				return probs
			}
		}
		data, err := yamldoc.ReadFile(full, s.Plan)
		if err != nil {
			var ce *caperr.Error
			if errors.As(err, &ce) {
				at("sub-plan: %s", ce.Message)
			} else {
				at("sub-plan %q: %v", s.Plan, err)
			}
			continue
		}
		sub, subProbs := Parse(s.Plan, data)
		if len(subProbs) > 0 {
			at("sub-plan %q is invalid: %d problem(s)", s.Plan, len(subProbs))
			probs = append(probs, subProbs...)
			continue
		}
		if more := loadSubs(sub, root, append(stack, full)); len(more) > 0 {
			probs = append(probs, more...)
			continue
		}
		doc, _ := yamldoc.Parse(s.Plan, data)
		s.Sub, s.SubValue = sub, doc.Root.Interface()
		// The sub-plan's inputs are what the step feeds it.
		for k := range s.With {
			if _, ok := sub.Inputs[k]; !ok {
				probs = append(probs, caperr.New(caperr.InvalidInput, "sub-plan %q takes no input %q (it takes: %s)", s.Plan, k, strings.Join(sub.InputNames(), ", ")).
					At(p.File, s.Line, 0, fmt.Sprintf("steps[%d].with.%s", i, k)))
			}
		}
		for _, name := range sub.InputNames() {
			if _, has := sub.Inputs[name]["default"]; !has {
				if _, given := s.With[name]; !given {
					probs = append(probs, caperr.New(caperr.InvalidInput, "sub-plan %q needs input %q", s.Plan, name).At(p.File, s.Line, 0, fmt.Sprintf("steps[%d].with", i)))
				}
			}
		}
	}
	return probs
}

func cycleText(root string, files []string) string {
	var out []string
	for _, f := range files {
		if r, err := filepath.Rel(root, f); err == nil {
			f = r
		}
		out = append(out, f)
	}
	return strings.Join(out, " → ")
}
