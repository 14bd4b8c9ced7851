package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/expr"
	"github.com/capflow/capflow/internal/runfolder"
	"github.com/capflow/capflow/internal/step"
	"github.com/capflow/capflow/internal/wfapi"
)

// Evaluate evaluates what the workflow cannot evaluate itself because the
// data lives in files: a for_each step's list (its length, and the items
// whose `when` is false) or a step's `when`. Its answer is recorded in
// history, so the decision replays.
func (a *Activities) Evaluate(ctx context.Context, in wfapi.EvaluateInput) (*wfapi.EvaluateResult, error) {
	fail := func(err error) (*wfapi.EvaluateResult, error) {
		return nil, appError(err)
	}
	id, err := runOf(ctx, "")
	if err != nil {
		return fail(err)
	}
	if b := in.Spilled; b != nil {
		var full wfapi.EvaluateInput
		dir, err := a.runFolder(ctx, "", "")
		if err == nil {
			err = a.readBlob(ctx, dir, *b, &full)
		}
		if err == nil && full.Spilled != nil {
			err = caperr.New(caperr.InvalidInput, "a stored Evaluate input names another")
		}
		if err != nil {
			return fail(caperr.As(err, caperr.ObservabilityError))
		}
		in = full
	}
	if dep, path := a.Exec.ForeignOutcome(id, in.Deps); dep != "" {
		return fail(caperr.New(caperr.ObservabilityError, "the stored output of step %s, %s, is not in this run's folder", dep, path))
	}
	scope, _, err := step.LoadScope(in.Inputs, in.Deps)
	if err != nil {
		return fail(err)
	}
	steps := wfapi.Conditions(in.Deps, func(id string) any { return scope.Steps[id].Data })
	if in.With != nil {
		v, err := scope.Eval(in.With)
		if err != nil {
			return fail(caperr.New(caperr.InvalidInput, "cannot evaluate the step's inputs: %v", err))
		}
		w, _ := v.(map[string]any)
		if !in.SpillWith {
			return &wfapi.EvaluateResult{Run: true, With: w}, nil
		}
		return a.evaluatedWith(ctx, w)
	}
	if in.ForEach == nil {
		run := true
		if in.When != "" {
			if run, err = expr.Eval(in.When, scope.Inputs, steps, "", nil, 0); err != nil {
				return fail(caperr.New(caperr.InvalidInput, "when %q: %v", in.When, err))
			}
		}
		return &wfapi.EvaluateResult{Run: run}, nil
	}
	list, err := step.ListOf(scope, in.ForEach)
	if err != nil {
		return fail(err)
	}
	out := &wfapi.EvaluateResult{Count: len(list)}
	for i, item := range list {
		if in.When == "" {
			continue
		}
		if i%256 == 0 && ctx.Err() != nil {
			return fail(caperr.New(caperr.Cancelled, "cancelled"))
		}
		ok, err := expr.Eval(in.When, scope.Inputs, steps, in.ItemName, item, i)
		if err != nil {
			return fail(caperr.New(caperr.InvalidInput, "when %q (item %d): %v", in.When, i, err))
		}
		if !ok {
			out.Skip = append(out.Skip, i)
		}
	}
	return out, nil
}

// evaluatedWith returns a sub-plan step's evaluated inputs: in the answer, or,
// past wfapi.MaxInputBytes, as a blob in the run folder that the child
// run loads (a result that large would not fit the activity's answer, nor
// the child's input).
func (a *Activities) evaluatedWith(ctx context.Context, w map[string]any) (*wfapi.EvaluateResult, error) {
	raw, err := json.Marshal(w)
	if err != nil || len(raw) <= wfapi.MaxInputBytes {
		return &wfapi.EvaluateResult{Run: true, With: w}, nil
	}
	dir, err := a.runFolder(ctx, "", "")
	if err != nil {
		return nil, appError(err)
	}
	sum := sha256.Sum256(raw)
	b := wfapi.Blob{Name: "input-" + hex.EncodeToString(sum[:8]) + ".json", SHA256: hex.EncodeToString(sum[:]), Size: len(raw),
		Parts: (len(raw) + wfapi.BlobPartBytes - 1) / wfapi.BlobPartBytes}
	err = os.MkdirAll(filepath.Join(dir, BlobDir), 0o755)
	if err == nil {
		err = runfolder.WriteAtomic(filepath.Join(dir, BlobDir, b.Name), raw)
	}
	if err != nil {
		return nil, appError(caperr.As(err, caperr.ObservabilityError))
	}
	return &wfapi.EvaluateResult{Run: true, WithSpilled: &b}, nil
}
