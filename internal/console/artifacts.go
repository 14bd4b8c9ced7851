package console

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/artifacts"
	"github.com/capflow/capflow/internal/beneath"
	"github.com/capflow/capflow/internal/caperr"
)

// getArtifact serves a file a step of the run named (by its sha256, one
// of the run's artifacts only): from the artifact store, else from this
// host's copy when it still has that digest. Text and images show in the
// browser; anything else downloads.
func (s *Server) getArtifact(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := reqCtx(r)
	defer cancel()
	id, digest := r.PathValue("id"), r.PathValue("sha256")
	res, err := s.result(ctx, id)
	if err != nil {
		s.runError(w, id, err, "progress of")
		return
	}
	art, ok := findArtifact(res, digest)
	if !ok {
		writeError(w, http.StatusNotFound, caperr.New(caperr.InvalidInput, "run %s names no artifact sha256:%s", id, digest))
		return
	}
	tmp, err := os.MkdirTemp("", "capflow-console-")
	if err != nil {
		writeError(w, http.StatusInternalServerError, caperr.Wrap(caperr.InternalError, err, "artifact"))
		return
	}
	defer os.RemoveAll(tmp)
	file := filepath.Join(tmp, "artifact")
	if err := s.fetch(ctx, art, tmp, "artifact"); err != nil {
		writeError(w, http.StatusNotFound, err)
		return
	}
	name := filepath.Base(art.Path)
	ctype := mime.TypeByExtension(filepath.Ext(name))
	switch {
	case ctype == "":
		ctype = "application/octet-stream"
	case strings.HasPrefix(ctype, "text/"):
		ctype = "text/plain; charset=utf-8" // never rendered as a page of the console
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'")
	if !strings.HasPrefix(ctype, "image/") && !strings.HasPrefix(ctype, "text/plain") {
		w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	}
	http.ServeFile(w, r, file)
}

func findArtifact(res *client.Result, digest string) (client.Artifact, bool) {
	for _, st := range res.Steps {
		for _, a := range st.Artifacts {
			if a.SHA256 == digest {
				return a, true
			}
		}
	}
	return client.Artifact{}, false
}

// fetch brings an artifact to dest: from the store, else this host's copy
// when its digest is still the recorded one.
func (s *Server) fetch(ctx context.Context, art client.Artifact, dir, name string) error {
	dest := filepath.Join(dir, name)
	store, err := s.store(ctx)
	if err == nil {
		if err = store.Fetch(ctx, art.SHA256, dir, name, 64<<30); err == nil {
			return nil
		}
	}
	if s.copyLocal(art, dest) == nil {
		return nil
	}
	return caperr.New(caperr.ObservabilityError, "artifact %s (sha256:%s) is neither in the store nor on this host: %v", art.Path, art.SHA256, err)
}

// copyLocal copies this host's copy of an artifact to dest when it lies in
// the project or its runs folder, opened beneath it, and its bytes still
// have the recorded digest (checked on the bytes copied, not before).
func (s *Server) copyLocal(art client.Artifact, dest string) error {
	cfg := s.o.Project.Config
	root, rel, ok := beneath.Pick([]string{cfg.Root, cfg.Abs(cfg.RunsDir)}, art.Path)
	if !ok {
		return caperr.New(caperr.InvalidInput, "%s is not in the project or its runs folder", art.Path)
	}
	dir, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer dir.Close()
	f, _, err := beneath.OpenRegular(dir, rel, "artifact", art.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	out, err := os.OpenFile(dest, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, h), f)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && hex.EncodeToString(h.Sum(nil)) != art.SHA256 {
		err = caperr.New(caperr.ObservabilityError, "%s no longer has its recorded digest", art.Path)
	}
	if err != nil {
		os.Remove(dest)
	}
	return err
}

// store opens the project's artifact store once.
func (s *Server) store(ctx context.Context) (*artifacts.Store, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.artifacts == nil {
		st, err := s.o.Project.Artifacts(ctx)
		if err != nil {
			return nil, err
		}
		s.artifacts = st
	}
	return s.artifacts, nil
}
