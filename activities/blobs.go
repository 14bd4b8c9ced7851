package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/runfolder"
	"github.com/capflow/capflow/internal/step"
	"github.com/capflow/capflow/internal/wfapi"
)

// Blobs (docs/limits.md) are values a workflow stores in its run folder in
// parts, each within one activity payload: a segment's checkpoint, the
// carry into the next segment. The folder is the activity's own run's;
// the name is one the engine gives (never a path).

// BlobDir is the folder of a run's blobs.
const BlobDir = "blobs"

func (a *Activities) blobPath(ctx context.Context, run, name string) (string, error) {
	if !wfapi.ValidBlobName(name) {
		return "", caperr.New(caperr.InvalidInput, "blob name %q is not one the engine gives", name)
	}
	dir, err := a.runFolder(ctx, run, "")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, BlobDir, name), nil
}

func partFile(path string, part int) string { return fmt.Sprintf("%s.part-%d", path, part) }

// PutBlob stores one part; the sealing part joins every part into the
// blob and checks its size and digest.
func (a *Activities) PutBlob(ctx context.Context, in wfapi.PutBlobInput) error {
	path, err := a.blobPath(ctx, in.Run, in.Name)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(path), 0o755)
	}
	if err == nil {
		err = runfolder.WriteAtomic(partFile(path, in.Part), in.Data)
	}
	if err == nil && in.Seal != nil {
		err = seal(path, *in.Seal)
	}
	if err != nil {
		return appError(caperr.As(err, caperr.ObservabilityError))
	}
	if in.Seal != nil && a.Exec.Artifacts != nil && a.Exec.Artifacts.Shared {
		// Another host may continue the run: it fetches the blob by digest.
		if _, _, err := a.Exec.Artifacts.PutFile(ctx, path); err != nil {
			return appError(err)
		}
	}
	return nil
}

// fetchBlob brings a blob this host lacks (or holds altered) from a
// shared store, by the digest the workflow recorded.
func (a *Activities) fetchBlob(ctx context.Context, path, digest string) error {
	if a.Exec.Artifacts == nil || !a.Exec.Artifacts.Shared || digest == "" {
		return nil
	}
	if raw, err := os.ReadFile(path); err == nil {
		if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) == digest {
			return nil
		}
	}
	return a.Exec.Artifacts.Fetch(ctx, digest, filepath.Dir(path), filepath.Base(path), step.MaxStoredData)
}

func seal(path string, b wfapi.Blob) error {
	if b.Parts < 1 || b.Parts > 1<<16 {
		return caperr.New(caperr.InvalidInput, "blob %s: %d parts", b.Name, b.Parts)
	}
	if sealed(path, b) {
		return nil // a retried seal whose first attempt finished
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	h := sha256.New()
	w := io.MultiWriter(f, h)
	n := int64(0)
	for k := 0; k < b.Parts && err == nil; k++ {
		var p *os.File
		if p, err = os.Open(partFile(path, k)); err == nil {
			var m int64
			m, err = io.Copy(w, p)
			n += m
			p.Close()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && (n != int64(b.Size) || hex.EncodeToString(h.Sum(nil)) != b.SHA256) {
		err = caperr.New(caperr.ObservabilityError, "blob %s: the parts joined give %d bytes, not the %d bytes with the digest recorded", b.Name, n, b.Size)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	for k := 0; k < b.Parts; k++ {
		os.Remove(partFile(path, k))
	}
	return nil
}

func sealed(path string, b wfapi.Blob) bool {
	raw, err := os.ReadFile(path)
	if err != nil || len(raw) != b.Size {
		return false
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:]) == b.SHA256
}

// GetBlob returns one part of a stored blob (the workflow checks the
// digest of the whole).
func (a *Activities) GetBlob(ctx context.Context, in wfapi.GetBlobInput) ([]byte, error) {
	path, err := a.blobPath(ctx, in.Run, in.Name)
	if err != nil {
		return nil, appError(err)
	}
	if _, err := os.Stat(path); err != nil {
		if err := a.fetchBlob(ctx, path, in.SHA256); err != nil {
			return nil, appError(err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, appError(caperr.New(caperr.ObservabilityError, "blob %s is unreadable: %v", in.Name, err))
	}
	defer f.Close()
	buf := make([]byte, wfapi.BlobPartBytes)
	n, err := f.ReadAt(buf, int64(in.Part)*wfapi.BlobPartBytes)
	if err != nil && err != io.EOF {
		return nil, appError(caperr.New(caperr.ObservabilityError, "blob %s part %d: %v", in.Name, in.Part, err))
	}
	return buf[:n], nil
}

// segmentSteps reads the steps a segment checkpointed: a blob, or the
// file of runs recorded before checkpoints became blobs.
func segmentSteps(dir string, n int) ([]byte, error) {
	raw, err := os.ReadFile(filepath.Join(dir, BlobDir, fmt.Sprintf("segment-%d.json", n)))
	if os.IsNotExist(err) {
		return os.ReadFile(segmentFile(dir, n))
	}
	return raw, err
}

// readBlob decodes a sealed blob of the run folder dir into v (fetched
// from a shared store when this host lacks it), refusing one whose size
// or digest is not what the workflow recorded.
func (a *Activities) readBlob(ctx context.Context, dir string, b wfapi.Blob, v any) error {
	if !wfapi.ValidBlobName(b.Name) {
		return caperr.New(caperr.InvalidInput, "blob %q is not a name the engine gives", b.Name)
	}
	path := filepath.Join(dir, BlobDir, b.Name)
	if err := a.fetchBlob(ctx, path, b.SHA256); err != nil && caperr.CodeOf(err) != caperr.ObservabilityError {
		return err
	}
	raw, err := os.ReadFile(path)
	sum := sha256.Sum256(raw)
	if err != nil || len(raw) != b.Size || hex.EncodeToString(sum[:]) != b.SHA256 {
		return caperr.New(caperr.ObservabilityError, "%s in the run folder is missing or altered", b.Name)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return caperr.Wrap(caperr.ObservabilityError, err, "the stored input %s", b.Name)
	}
	return nil
}

// unspill puts back what the workflow stored of a large input (its
// digest checked: only what the workflow wrote is read).
func (a *Activities) unspill(ctx context.Context, runDir string, in *wfapi.RunToolInput) error {
	if in.Spilled == nil {
		return nil
	}
	var sp wfapi.Spill
	if err := a.readBlob(ctx, runDir, *in.Spilled, &sp); err != nil {
		return err
	}
	in.Step.With, in.Inputs, in.Deps, in.Spilled = sp.With, sp.Inputs, sp.Deps, nil
	if it := in.Step.Item; it != nil {
		item := *it
		item.Value, item.ForEach = sp.Value, sp.ForEach
		in.Step.Item = &item
	}
	return nil
}
