package step

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/jsonsize"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/wfapi"
)

// evalInputs evaluates the step's with. References are evaluated here,
// not in the workflow: large outputs of earlier steps live in files, which
// workflow code may not read. An item whose list is stored by reference
// reads that list through the worker's cache, so only what the step's
// with references is loaded.
func (r *stepRun) evalInputs(e *Executor) (any, error) {
	in, step := r.in, r.in.Step
	if id, path := e.ForeignOutcome(in.WorkflowID, in.Deps); id != "" {
		// Another host's file (a run that moved) or a forged path: never
		// read; the producer runs again here when it may.
		r.lost = append(r.lost, id)
		return nil, caperr.New(caperr.ObservabilityError, "the stored output of step %s, %s, is not in this run's folder", id, path)
	}
	deps := in.Deps
	if it := step.Item; it != nil && !it.HasValue {
		deps = ReferencedBy(step.With, in.Deps)
	}
	scope, lostID, err := LoadScope(in.Inputs, deps)
	if err != nil {
		r.lose(lostID)
		return nil, err
	}
	movedFiles(scope, deps)
	if it := step.Item; it != nil {
		item := it.Value
		if !it.HasValue {
			if item, lostID, err = e.itemOf(in.Inputs, ReferencedBy(it.ForEach, in.Deps), it.ForEach, it.Index); err != nil {
				r.lose(lostID)
				return nil, err
			}
		}
		scope.Item, scope.ItemName, scope.Index = item, it.ItemName, it.Index
	}
	inputs, err := scope.Eval(step.With)
	if err != nil {
		return nil, caperr.New(caperr.InvalidInput, "cannot evaluate the step's inputs: %s", err.Error())
	}
	if !jsonsize.Within(inputs, plan.MaxInterpolated) {
		// One large value many references share is encoded each time.
		return nil, caperr.New(caperr.InvalidInput, "the step's inputs pass %d MB once their references are filled in", plan.MaxInterpolated>>20)
	}
	return inputs, nil
}

func (r *stepRun) lose(id string) {
	if id != "" {
		r.lost = append(r.lost, id)
	}
}

// ListOf evaluates a for_each source to its list.
func ListOf(scope plan.Scope, src any) ([]any, error) {
	v, err := scope.Eval(src)
	if err != nil {
		return nil, caperr.New(caperr.InvalidInput, "for_each: %v", err)
	}
	list, ok := v.([]any)
	if !ok {
		return nil, caperr.New(caperr.InvalidInput, "for_each: the value is a %T, not a list", v)
	}
	return list, nil
}

// itemOf returns element index of a for_each list. Lists read from stored
// outputs are cached per worker, keyed by the digests of what they read:
// ten thousand items must not parse the same file ten thousand times.
func (e *Executor) itemOf(inputs map[string]any, deps map[string]wfapi.StepOutcome, src any, index int) (any, string, error) {
	key, _ := json.Marshal(src)
	for _, id := range slices.Sorted(maps.Keys(deps)) {
		key = append(key, []byte("|"+id+":"+deps[id].DataSHA256)...)
	}
	e.mu.Lock()
	list, ok := e.lists[string(key)]
	e.mu.Unlock()
	if !ok {
		scope, lostID, err := LoadScope(inputs, deps)
		if err != nil {
			return nil, lostID, err
		}
		if list, err = ListOf(scope, src); err != nil {
			return nil, "", err
		}
		e.mu.Lock()
		if e.lists == nil || len(e.lists) > 16 {
			e.lists = map[string][]any{}
		}
		e.lists[string(key)] = list
		e.mu.Unlock()
	}
	if index < 0 || index >= len(list) {
		return nil, "", caperr.New(caperr.InvalidInput, "for_each: item %d of a %d-item list", index, len(list))
	}
	return list[index], "", nil
}
