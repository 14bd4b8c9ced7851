package plan

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/capflow/capflow/internal/beneath"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/yamldoc"
)

// LoadSubPlans loads the sub-plans of p's `plan:` steps (paths from the
// project root, which they may not leave), recursively, refusing cycles
// between plan files. Every problem is reported, positioned in the file
// that names the sub-plan.
func LoadSubPlans(p *Plan, root string) caperr.Problems {
	abs, _ := filepath.Abs(p.File)
	return LoadSubPlansOf(p, root, abs)
}

// LoadSubPlansOf is LoadSubPlans for a plan read from the file at abs
// (p.File being the name its problems show).
func LoadSubPlansOf(p *Plan, root, abs string) caperr.Problems {
	l := &loader{root: root, done: map[string]*loaded{}}
	return l.subs(p, []string{abs})
}

// A loader reads and checks each sub-plan file once, however many steps
// name it: steps that name the same file share its *Plan. A plan that
// includes the next one twice, twenty levels deep, is twenty files, not a
// million (LeafSteps counts what it would run without expanding it).
type loader struct {
	root string
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

// ReadBeneath reads the plan file at rel, a path from the project root
// that InProject accepted, through a handle on the root (os.Root): a link
// swapped in after that check cannot lead the read out of the project.
// os.Root refuses a link with an absolute target; one that leads inside
// the project is read by the path it leads to, through the same handle.
func ReadBeneath(root, rel string) ([]byte, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, caperr.Wrap(caperr.InvalidInput, err, "cannot read the project folder %s", root)
	}
	defer r.Close()
	open := func(name string) (*os.File, error) { return r.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0) }
	f, err := open(rel)
	if beneath.Escapes(err) {
		if inside, ok := linkedInside(root, rel); ok {
			f, err = open(inside)
		}
	}
	var data []byte
	if err == nil {
		data, err = yamldoc.ReadOpened(f, rel)
	} else {
		err = beneath.Refusal(err, caperr.InvalidInput, "file", rel)
	}
	if err != nil {
		ce := caperr.As(err, caperr.InvalidInput)
		ce.Message += fmt.Sprintf("; a plan's files are named from the project root, %s", root)
		return nil, ce
	}
	return data, nil
}

// linkedInside is where the links on rel lead, from the project's real
// root, when that is inside it.
func linkedInside(root, rel string) (string, bool) {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", false
	}
	real, err := filepath.EvalSymlinks(filepath.Join(root, rel))
	if err != nil {
		return "", false
	}
	inside, ok := beneath.Rel(realRoot, real)
	return inside, ok && inside != "."
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
	data, err := ReadBeneath(l.root, name)
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
