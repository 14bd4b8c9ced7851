package plan

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/yamldoc"
)

// ReadFunc reads the plan file at rel, a path from the project root that
// InProject accepted (planfile.Read: through a handle on the root; this
// package, which workflow code links, opens no file by a name).
type ReadFunc func(root, rel string) ([]byte, error)

// LoadSubPlans loads the sub-plans of p's `plan:` steps (paths from the
// project root, which they may not leave) with read, recursively,
// refusing cycles between plan files. Every problem is reported,
// positioned in the file that names the sub-plan.
func LoadSubPlans(p *Plan, root string, read ReadFunc) caperr.Problems {
	abs, _ := filepath.Abs(p.File)
	return LoadSubPlansOf(p, root, abs, read)
}

// LoadSubPlansOf is LoadSubPlans for a plan read from the file at abs
// (p.File being the name its problems show).
func LoadSubPlansOf(p *Plan, root, abs string, read ReadFunc) caperr.Problems {
	l := &loader{root: root, read: read, done: map[string]*loaded{}}
	return l.subs(p, []string{abs})
}

// A loader reads and checks each sub-plan file once, however many steps
// name it: steps that name the same file share its *Plan. A plan that
// includes the next one twice, twenty levels deep, is twenty files, not a
// million (LeafSteps counts what it would run without expanding it).
type loader struct {
	root string
	read ReadFunc
	done map[string]*loaded
}

type loaded struct {
	plan  *Plan
	value any
	ok    bool // parsed, and its own sub-plans loaded, without problems
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

func (l *loader) subs(p *Plan, stack []string) caperr.Problems {
	var probs caperr.Problems
	for i, s := range p.Steps {
		if s.Plan == "" {
			continue
		}
		at := func(format string, args ...any) {
			probs = append(probs, caperr.New(caperr.InvalidInput, format, args...).At(p.File, s.Line, 0, fmt.Sprintf("steps[%d].plan", i)))
		}
		full, err := InProject(l.root, s.Plan)
		if err != nil {
			at("sub-plan %v", err)
			continue
		}
		if slices.Contains(stack, full) {
			at("sub-plan %q includes itself: %s", s.Plan, cycleText(l.root, append(stack, full)))
			return probs
		}
		sub, more := l.file(s.Plan, full, stack, at)
		probs = append(probs, more...)
		if sub == nil {
			continue
		}
		s.Sub, s.SubValue = sub.plan, sub.value
		probs = append(probs, inputProblems(p, i, s, sub.plan)...)
	}
	return probs
}

// file loads one sub-plan file (once); nil when it has problems, which
// are returned the first time only.
func (l *loader) file(name, full string, stack []string, at func(string, ...any)) (*loaded, caperr.Problems) {
	if d, seen := l.done[full]; seen {
		if !d.ok {
			at("sub-plan %q is invalid", name)
			return nil, nil
		}
		return d, nil
	}
	d := &loaded{}
	l.done[full] = d
	data, err := l.read(l.root, name)
	if err != nil {
		var ce *caperr.Error
		if errors.As(err, &ce) {
			at("sub-plan: %s", ce.Message)
		} else {
			at("sub-plan %q: %v", name, err)
		}
		return nil, nil
	}
	sub, probs := Parse(name, data)
	if len(probs) > 0 {
		at("sub-plan %q is invalid: %d problem(s)", name, len(probs))
		return nil, probs
	}
	if more := l.subs(sub, append(stack, full)); len(more) > 0 {
		return nil, more
	}
	doc, _ := yamldoc.Parse(name, data)
	d.plan, d.value, d.ok = sub, doc.Root.Interface(), true
	return d, nil
}

// inputProblems checks what step i feeds its sub-plan against the
// inputs the sub-plan takes.
func inputProblems(p *Plan, i int, s *Step, sub *Plan) caperr.Problems {
	var probs caperr.Problems
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
	return probs
}

// LeafSteps is the number of tool steps p runs, its sub-plans' included,
// counted without walking each inclusion (saturating at MaxInt32).
func LeafSteps(p *Plan) int {
	return leafSteps(p, map[*Plan]int{})
}

func leafSteps(p *Plan, memo map[*Plan]int) int {
	if n, ok := memo[p]; ok {
		return n
	}
	n := 0
	for _, s := range p.Steps {
		switch {
		case s.Sub != nil:
			n += leafSteps(s.Sub, memo)
		case s.Plan == "":
			n++
		}
		n = min(n, math.MaxInt32)
	}
	memo[p] = n
	return n
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
