// Package artifacts is the store of step outputs: content-addressed blobs
// (key sha256/<first two hex digits>/<sha256>) in a gocloud.dev/blob
// bucket, a folder by default and S3 for clusters, so a worker on another
// host reads what a step wrote and a cache can reuse it. Every read is
// checked against its digest; a store that cannot be reached is
// DEPENDENCY_UNAVAILABLE (retried), an artifact that is missing or altered
// OBSERVABILITY_ERROR naming it.
package artifacts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/s3blob" // s3:// URLs
	"gocloud.dev/gcerrors"

	"github.com/capflow/capflow/internal/beneath"
	"github.com/capflow/capflow/internal/caperr"
)

// Store is an open artifact store.
type Store struct {
	bucket *blob.Bucket
	// Where is the store as a person reads it (no query: it may name
	// credentials' profiles, endpoints).
	Where string
	// Shared says the store was configured (not the host-local default):
	// other hosts read it too.
	Shared bool
}

// Options of Open.
type Options struct {
	// URL is capflow.yaml's artifacts.url: file:///abs/path or
	// s3://bucket?endpoint=...&region=...&use_path_style=true&prefix=p/;
	// "" is the host-local default, <StateDir>/artifacts.
	URL string
	// StateDir is the project's state folder (.capflow), absolute.
	StateDir string
}

var schemes = map[string]bool{"file": true, "s3": true}

// Open opens the store. A URL of a scheme capflow does not support, or
// one that does not parse, is CONFIG_ERROR.
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.URL == "" {
		return openFolder(filepath.Join(o.StateDir, "artifacts"), false)
	}
	u, err := url.Parse(o.URL)
	if err != nil || !schemes[u.Scheme] {
		return nil, caperr.New(caperr.ConfigError, "artifacts.url %q: want file:///absolute/folder or s3://bucket?endpoint=...&region=...", o.URL)
	}
	if u.Scheme == "file" && (u.Host != "" || !filepath.IsAbs(u.Path)) {
		// gocloud.dev reads file://x/y as /y: refuse rather than write
		// somewhere else than meant.
		return nil, caperr.New(caperr.ConfigError, "artifacts.url %q: a file store needs an absolute path (file:///srv/capflow/artifacts)", o.URL)
	}
	if u.Scheme == "file" {
		return openFolder(u.Path, true)
	}
	b, err := blob.OpenBucket(ctx, o.URL)
	if err != nil {
		return nil, caperr.Wrap(caperr.ConfigError, err, "artifacts.url %q", o.URL)
	}
	return &Store{bucket: b, Where: u.Scheme + "://" + u.Host + u.Path, Shared: true}, nil
}

// openFolder opens a file store, making its folder: temporary files go
// beside the artifacts (a rename across file systems, to a shared mount,
// would fail), no metadata files.
func openFolder(dir string, shared bool) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, caperr.Wrap(caperr.ConfigError, err, "artifact store %s", dir)
	}
	b, err := fileblob.OpenBucket(dir, &fileblob.Options{NoTempDir: true, Metadata: fileblob.MetadataDontWrite})
	if err != nil {
		return nil, caperr.Wrap(caperr.ConfigError, err, "artifact store %s", dir)
	}
	return &Store{bucket: b, Where: "file://" + dir, Shared: shared}, nil
}

// Close releases the store.
func (s *Store) Close() error { return s.bucket.Close() }

var digestRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Key is where an artifact lives in the store.
func Key(digest string) string { return "sha256/" + digest[:2] + "/" + digest }

// Digest is the sha256 of raw, in hex.
func Digest(raw []byte) string {
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// Put stores raw under its digest and returns it. An artifact already
// there is the same bytes: writers that race write the same thing, and
// the store keeps one (create-only where the store supports it).
func (s *Store) Put(ctx context.Context, raw []byte) (string, error) {
	d := Digest(raw)
	return d, s.put(ctx, d, bytes.NewReader(raw))
}

// PutFile stores a file under its digest and returns the digest and size.
// path is the engine's own (a blob it sealed); a file a tool named is
// opened beneath its folder and given to PutOpened.
func (s *Store) PutFile(ctx context.Context, path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, caperr.Wrap(caperr.ObservabilityError, err, "artifact %s", path)
	}
	defer f.Close()
	return s.PutOpened(ctx, f, path)
}

// PutOpened stores an opened file under its digest (read from its start);
// name is for messages.
func (s *Store) PutOpened(ctx context.Context, f io.ReadSeeker, name string) (string, int64, error) {
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, caperr.Wrap(caperr.ObservabilityError, err, "artifact %s", name)
	}
	d := hex.EncodeToString(h.Sum(nil))
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", 0, caperr.Wrap(caperr.ObservabilityError, err, "artifact %s", name)
	}
	return d, n, s.put(ctx, d, f)
}

func (s *Store) put(ctx context.Context, d string, r io.Reader) error {
	if ok, err := s.Has(ctx, d); err != nil || ok {
		return err
	}
	w, err := s.bucket.NewWriter(ctx, Key(d), &blob.WriterOptions{ContentType: "application/octet-stream", IfNotExist: true})
	if err != nil {
		return s.fail(err, d)
	}
	_, err = io.Copy(w, r)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil || gcerrors.Code(err) == gcerrors.FailedPrecondition {
		return nil
	}
	// A racing writer's create-only write can make the server refuse this
	// one mid-body (S3 servers may answer 412 and close the connection):
	// the artifact is there, and it is the same bytes (its key is their
	// digest, checked on every read).
	if ok, herr := s.Has(ctx, d); herr == nil && ok {
		return nil
	}
	return s.fail(err, d)
}

// Has reports whether the store holds the artifact.
func (s *Store) Has(ctx context.Context, d string) (bool, error) {
	if !digestRE.MatchString(d) {
		return false, caperr.New(caperr.InvalidInput, "%q is not a sha256 digest", d)
	}
	ok, err := s.bucket.Exists(ctx, Key(d))
	if err != nil {
		return false, s.fail(err, d)
	}
	return ok, nil
}

// Get reads an artifact of at most max bytes and checks its digest.
func (s *Store) Get(ctx context.Context, d string, max int64) ([]byte, error) {
	if !digestRE.MatchString(d) {
		return nil, caperr.New(caperr.InvalidInput, "%q is not a sha256 digest", d)
	}
	r, err := s.bucket.NewReader(ctx, Key(d), nil)
	if err != nil {
		return nil, s.fail(err, d)
	}
	defer r.Close()
	if r.Size() > max {
		return nil, caperr.New(caperr.ObservabilityError, "artifact sha256:%s is %d bytes, more than the %d allowed", d, r.Size(), max)
	}
	raw, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, s.fail(err, d)
	}
	if got := Digest(raw); got != d {
		return nil, caperr.New(caperr.ObservabilityError, "artifact sha256:%s in %s was altered (its bytes hash to %s)", d, s.Where, got)
	}
	return raw, nil
}

// Fetch writes an artifact to rel beneath the folder root (streamed,
// checked against its digest before it takes its name, never following a
// link out of root): how a worker on another host gets what a step wrote.
// An artifact larger than max is refused.
func (s *Store) Fetch(ctx context.Context, d, root, rel string, max int64) error {
	if !digestRE.MatchString(d) {
		return caperr.New(caperr.InvalidInput, "%q is not a sha256 digest", d)
	}
	r, err := s.bucket.NewReader(ctx, Key(d), nil)
	if err != nil {
		return s.fail(err, d)
	}
	defer r.Close()
	if r.Size() > max {
		return caperr.New(caperr.ObservabilityError, "artifact sha256:%s is %d bytes, more than the %d allowed", d, r.Size(), max)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return caperr.Wrap(caperr.ObservabilityError, err, "artifact sha256:%s", d)
	}
	dir, err := os.OpenRoot(root)
	if err != nil {
		return caperr.Wrap(caperr.ObservabilityError, err, "artifact sha256:%s", d)
	}
	defer dir.Close()
	var copyErr error
	err = beneath.Create(dir, rel, 0o644, func(w io.Writer) error {
		h := sha256.New()
		if _, copyErr = io.Copy(io.MultiWriter(w, h), io.LimitReader(r, max+1)); copyErr != nil {
			return copyErr
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != d {
			return caperr.New(caperr.ObservabilityError, "artifact sha256:%s in %s was altered (its bytes hash to %s)", d, s.Where, got)
		}
		return nil
	})
	switch {
	case err == nil:
		return nil
	case copyErr != nil:
		return s.fail(copyErr, d)
	case caperr.CodeOf(err) == caperr.ObservabilityError:
		return err
	}
	return beneath.Refusal(err, caperr.ObservabilityError, "artifact sha256:"+d[:12]+" destination", rel)
}

// fail maps a store error to the contract's codes: missing is
// OBSERVABILITY_ERROR naming the artifact, a context's end is its own
// code, anything else (refused, timed out, denied) DEPENDENCY_UNAVAILABLE,
// which the step retries.
func (s *Store) fail(err error, d string) error { return s.failAs(err, "artifact sha256:"+d) }

// failRecord is fail for a record.
func (s *Store) failRecord(err error, name string) error { return s.failAs(err, "record "+name) }

func isNotFound(err error) bool { return gcerrors.Code(err) == gcerrors.NotFound }

func (s *Store) failAs(err error, what string) error {
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return caperr.New(caperr.ObservabilityError, "%s is not in the store %s", what, s.Where)
	case gcerrors.Canceled:
		return caperr.Wrap(caperr.Cancelled, err, "artifact store %s", s.Where)
	case gcerrors.DeadlineExceeded:
		return caperr.Wrap(caperr.TaskTimeout, err, "artifact store %s", s.Where)
	}
	if errors.Is(err, context.Canceled) {
		return caperr.Wrap(caperr.Cancelled, err, "artifact store %s", s.Where)
	}
	return caperr.Wrap(caperr.DependencyUnavailable, err, "artifact store %s cannot be reached", s.Where)
}

// String names the store.
func (s *Store) String() string { return fmt.Sprintf("artifacts at %s", s.Where) }
