package step

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/capflow/capflow/internal/beneath"
	"github.com/capflow/capflow/internal/cache"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/runfolder"
	"github.com/capflow/capflow/internal/wfapi"
)

// publish puts a succeeded step's stored data into the artifact store,
// under the digest history records. With a shared store (other hosts read
// it) a store that cannot take it fails the attempt, DEPENDENCY_UNAVAILABLE
// and retried; the host-local default only logs.
func (e *Executor) publish(ctx context.Context, res *wfapi.RunToolResult) error {
	if e.Artifacts == nil || res.DataFile == "" {
		return nil
	}
	raw, err := os.ReadFile(res.DataFile)
	if err == nil {
		_, err = e.Artifacts.Put(ctx, raw)
	}
	if err != nil && e.Artifacts.Shared {
		return err
	}
	if err != nil {
		e.Logger.Warn("artifact store", "error", err.Error())
	}
	return nil
}

// localize brings the stored outputs a step reads onto this host: with a
// shared store, an output that lies on another host (the run moved) or is
// missing here is fetched by its digest into this run's folder, checked,
// and read from there. One the store does not hold is left to the
// lost-data path (the producer runs again where it may).
func (e *Executor) localize(ctx context.Context, in *wfapi.RunToolInput) error {
	if e.Artifacts == nil || !e.Artifacts.Shared {
		return nil
	}
	for id, o := range in.Deps {
		if err := e.localizeFiles(ctx, in, id, o); err != nil {
			return err
		}
		if o.DataFile == "" || o.DataSHA256 == "" {
			continue
		}
		if e.InRun(in.WorkflowID, o.DataFile) == nil {
			if _, err := os.Stat(o.DataFile); err == nil {
				continue
			}
		}
		local, ok := localPath(in.RunDir, runfolder.Name(in.WorkflowID), o.DataFile, id)
		if !ok {
			continue
		}
		err := e.Artifacts.Fetch(ctx, o.DataSHA256, in.RunDir, relTo(in.RunDir, local), MaxStoredData)
		if caperr.CodeOf(err) == caperr.ObservabilityError {
			continue
		}
		if err != nil {
			return err
		}
		o.DataFile = local
		in.Deps[id] = o
	}
	return nil
}

// localizeFiles fetches the files a dependency's data names that are not
// this host's (the run moved): into this run's folder where they were in
// the other host's, else steps/ID/artifacts/; the data is pointed at them
// when the step's inputs are evaluated (movedFiles). A file is this
// host's when it lies in this run's folder or this project, whole: the
// lost host's folder may still be readable at its path (another folder of
// the machine, a mount), and a step reads only what is its run's.
func (e *Executor) localizeFiles(ctx context.Context, in *wfapi.RunToolInput, id string, o wfapi.StepOutcome) error {
	if len(o.Artifacts) == 0 {
		return nil
	}
	arts := slices.Clone(o.Artifacts)
	names := artifactNames(arts)
	fetched := map[string]string{} // one fetch a file, however many names it has
	for i, art := range arts {
		if e.ownFile(in.WorkflowID, art) {
			continue
		}
		if local, ok := fetched[art.SHA256]; ok {
			arts[i].Path = local
			continue
		}
		local := filepath.Join(runfolder.Step(in.RunDir, id, -1), "artifacts", names[i])
		if folder := runfolder.Name(in.WorkflowID); strings.Contains(art.Path, "/"+folder+"/") {
			if p, ok := localPath(in.RunDir, folder, art.Path, id); ok {
				local = p
			}
		}
		if err := e.Artifacts.Fetch(ctx, art.SHA256, in.RunDir, relTo(in.RunDir, local), MaxArtifact); err != nil {
			return err
		}
		fetched[art.SHA256] = local
		arts[i].Path = local
	}
	o.Artifacts = arts
	in.Deps[id] = o
	return nil
}

// ownFile: art lies in the run's folder on this host, or in this project,
// and is there with its size.
func (e *Executor) ownFile(run string, art wfapi.Artifact) bool {
	if _, in := beneath.Rel(e.Project.Root(), art.Path); !in && e.InRun(run, art.Path) != nil {
		return false
	}
	st, err := os.Stat(art.Path)
	return err == nil && st.Mode().IsRegular() && st.Size() == art.Bytes
}

// movedFiles points loaded data at the files localize fetched.
func movedFiles(scope plan.Scope, deps map[string]wfapi.StepOutcome) {
	for id, o := range deps {
		out, ok := scope.Steps[id]
		if !ok {
			continue
		}
		for _, art := range o.Artifacts {
			cache.Set(out.Data, art.Pointer, art.Path)
		}
	}
}

// relTo is path, which the engine derived beneath dir, relative to dir.
func relTo(dir, path string) string {
	rel, _ := filepath.Rel(dir, path)
	return rel
}

// localPath is where a stored output of another host goes in this run's
// folder: at the same place under the run folder (records/ID/data.json,
// records/ID/items/N/data.json; before them, steps/...), else
// records/ID/data.json.
func localPath(runDir, folder, remote, id string) (string, bool) {
	rel := filepath.Join("records", runfolder.Safe(id), DataFile)
	if i := strings.LastIndex(remote, "/"+folder+"/"); i >= 0 {
		rel = filepath.Clean(remote[i+len(folder)+2:])
	}
	p := filepath.Join(runDir, rel)
	if p == runDir || Within(runDir, p) != nil {
		return "", false
	}
	return p, true
}

// readStored reads an earlier step's stored output and checks it against
// the digest recorded in history; why says what is wrong, "" when nothing.
func readStored(o wfapi.StepOutcome) ([]byte, string) {
	raw, why := readBounded(o.DataFile)
	if why != "" {
		return nil, why
	}
	if o.DataSHA256 != "" {
		sum := sha256.Sum256(raw)
		if got := hex.EncodeToString(sum[:]); got != o.DataSHA256 {
			return nil, fmt.Sprintf("was altered (sha256 %s, recorded %s)", got[:12], o.DataSHA256[:min(12, len(o.DataSHA256))])
		}
	}
	return raw, ""
}

// readBounded reads a stored output: a regular file of at most
// MaxStoredData bytes, opened beneath its own folder (a link to a device
// or out of the folder is not followed, a file that grows is not read
// past the bound). why says what is wrong, "" when nothing.
func readBounded(path string) ([]byte, string) {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, "is missing"
	}
	raw, err := beneath.ReadFile(filepath.Dir(path), filepath.Base(path), MaxStoredData, "stored output")
	if err != nil {
		return nil, "is not a regular file of a plausible size: " + err.Error()
	}
	return raw, ""
}

// LoadScope builds the values references resolve against, reading stored
// outputs back (checked against their recorded digests). lost names the
// step whose stored output is missing or altered.
func LoadScope(inputs map[string]any, deps map[string]wfapi.StepOutcome) (plan.Scope, string, error) {
	scope := plan.Scope{Inputs: inputs, Steps: map[string]plan.StepOutcome{}}
	for id, o := range deps {
		data := o.Data
		if o.DataFile != "" {
			raw, why := readStored(o)
			if why == "" {
				if err := json.Unmarshal(raw, &data); err != nil {
					why = "is not JSON: " + err.Error()
				}
			}
			if why != "" {
				return scope, id, caperr.New(caperr.ObservabilityError, "the stored output of step %s, %s, %s", id, o.DataFile, why)
			}
		}
		scope.Steps[id] = plan.StepOutcome{Success: o.Success, Data: data}
	}
	return scope, "", nil
}

// ReferencedBy keeps the outcomes of the steps a value references.
func ReferencedBy(v any, deps map[string]wfapi.StepOutcome) map[string]wfapi.StepOutcome {
	out := map[string]wfapi.StepOutcome{}
	plan.CollectRefs(v, nil, func(_ []string, t plan.Template, err error) {
		for _, r := range t.Refs() {
			if o, ok := deps[r.Name]; ok && r.Kind == plan.RefSteps {
				out[r.Name] = o
			}
		}
	})
	return out
}
