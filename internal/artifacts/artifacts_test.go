package artifacts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/caperr"
)

func code(err error) caperr.Code {
	var ce *caperr.Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return ""
}

// exercise is what every store must do: put, has, get, fetch, a missing
// artifact named, concurrent writers of one artifact.
func exercise(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	raw := []byte(`{"answer": 42}`)
	d, err := s.Put(ctx, raw)
	if err != nil || d != Digest(raw) {
		t.Fatalf("put: %s %v", d, err)
	}
	if ok, err := s.Has(ctx, d); !ok || err != nil {
		t.Fatalf("has: %v %v", ok, err)
	}
	if got, err := s.Get(ctx, d, 1<<20); err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("get: %q %v", got, err)
	}
	if _, err := s.Get(ctx, d, 4); code(err) != caperr.ObservabilityError {
		t.Fatalf("an artifact past the bound: %v", err)
	}
	run := t.TempDir()
	dest := filepath.Join(run, "step", "data.json")
	if err := s.Fetch(ctx, d, run, "step/data.json", 1<<20); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dest); !bytes.Equal(b, raw) {
		t.Fatalf("fetched %q", b)
	}
	// A link the run folder holds, leading out of it, is never followed
	// (the hostile audit's H2: a planted authorized_keys), nor is "..".
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(run, "sub")); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"sub/authorized_keys", "../x", "/etc/x"} {
		if err := s.Fetch(ctx, d, run, rel, 1<<20); code(err) != caperr.InvalidInput {
			t.Fatalf("fetch to %s: %v, want INVALID_INPUT", rel, err)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("a fetch wrote outside its folder: %v", ents)
	}
	missing := Digest([]byte("never stored"))
	if _, err := s.Get(ctx, missing, 1<<20); code(err) != caperr.ObservabilityError || !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing artifact: %v", err)
	}
	if _, err := s.Has(ctx, "../../etc/passwd"); code(err) != caperr.InvalidInput {
		t.Fatalf("a key that is no digest: %v", err)
	}
	// Eight writers of the same large artifact at once: one artifact, whole.
	big := bytes.Repeat([]byte("capflow "), 1<<17)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Put(ctx, big)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent put: %v", err)
		}
	}
	if got, err := s.Get(ctx, Digest(big), 8<<20); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("concurrent puts left %d bytes: %v", len(got), err)
	}
	records(t, s)
}

// records: named documents are written whole, replaced, listed and
// deleted; a name that could leave the store is refused.
func records(t *testing.T, s *Store) {
	ctx := context.Background()
	for _, v := range []string{`{"v":1}`, `{"v":2}`} {
		if err := s.PutRecord(ctx, "cache/ab/abcdef.json", []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.GetRecord(ctx, "cache/ab/abcdef.json", 1<<10); err != nil || string(got) != `{"v":2}` {
		t.Fatalf("record: %q %v", got, err)
	}
	if err := s.PutRecord(ctx, "cache/cd/cdef.json", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	list, err := s.Records(ctx, "cache/")
	if err != nil || len(list) != 2 || list[0].Name != "cache/ab/abcdef.json" || list[0].Size != 7 {
		t.Fatalf("records: %+v %v", list, err)
	}
	if err := s.DeleteRecord(ctx, "cache/cd/cdef.json"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRecord(ctx, "cache/cd/cdef.json"); err != nil {
		t.Fatalf("deleting what is gone: %v", err)
	}
	if _, err := s.GetRecord(ctx, "cache/cd/cdef.json", 1<<10); code(err) != caperr.ObservabilityError {
		t.Fatalf("a deleted record: %v", err)
	}
	for _, bad := range []string{"../x", "cache/../../etc", "/abs/x", "cache"} {
		if err := s.PutRecord(ctx, bad, nil); code(err) != caperr.InvalidInput {
			t.Fatalf("record name %q: %v", bad, err)
		}
	}
	_ = s.DeleteRecord(ctx, "cache/ab/abcdef.json")
}

func TestFileStore(t *testing.T) {
	state := t.TempDir()
	s, err := Open(context.Background(), Options{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Shared || s.Where != "file://"+filepath.Join(state, "artifacts") {
		t.Fatalf("default store: %+v", s)
	}
	exercise(t, s)
	// An artifact altered on disk is refused, naming it.
	raw := []byte("original")
	d, _ := s.Put(context.Background(), raw)
	if err := os.WriteFile(filepath.Join(state, "artifacts", Key(d)), []byte("tampered"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(context.Background(), d, 1<<20); code(err) != caperr.ObservabilityError || !strings.Contains(err.Error(), "was altered") {
		t.Fatalf("tampered artifact: %v", err)
	}
	// A configured file store is shared (another host may mount it).
	shared, err := Open(context.Background(), Options{URL: "file://" + t.TempDir()})
	if err != nil || !shared.Shared {
		t.Fatalf("configured file store: %+v %v", shared, err)
	}
	shared.Close()
}

func TestBadStoreURLs(t *testing.T) {
	for _, u := range []string{"ftp://host/x", "file://relative/path", "gs://bucket", "::"} {
		if _, err := Open(context.Background(), Options{URL: u}); code(err) != caperr.ConfigError {
			t.Errorf("%s: %v", u, err)
		}
	}
}

// A store that cannot be reached is DEPENDENCY_UNAVAILABLE (retried).
func TestUnreachableStore(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	s, err := Open(context.Background(), Options{URL: "s3://bucket?endpoint=http://" + addr + "&region=us-east-1&use_path_style=true"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Put(ctx, []byte("x")); code(err) != caperr.DependencyUnavailable {
		t.Fatalf("unreachable store: %v", err)
	}
}

// versitygw is the S3-compatible server `make versitygw` builds into bin/.
func versitygw(t *testing.T) string {
	t.Helper()
	p := os.Getenv("CAPFLOW_VERSITYGW_BIN")
	if p == "" {
		p, _ = filepath.Abs("../../bin/versitygw")
	}
	if _, err := os.Stat(p); err != nil {
		if testing.Short() {
			t.Skip("needs bin/versitygw (make versitygw)")
		}
		t.Fatalf("no S3 server to test against: %v (make versitygw builds it; make test does)", err)
	}
	return p
}

// The s3 driver against a real S3-compatible server over a folder.
func TestS3Store(t *testing.T) {
	bin := versitygw(t)
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	data := t.TempDir()
	if err := os.Mkdir(filepath.Join(data, "capflow"), 0o755); err != nil { // a folder is a bucket
		t.Fatal(err)
	}
	srv := exec.Command(bin, "--port", addr, "--access", "capflow", "--secret", "capflow-secret", "posix", data)
	var out bytes.Buffer
	srv.Stdout, srv.Stderr = &out, &out
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "capflow")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "capflow-secret")
	s, err := Open(context.Background(), Options{URL: fmt.Sprintf("s3://capflow?endpoint=http://%s&region=us-east-1&use_path_style=true&prefix=runs/", addr)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Shared || s.Where != "s3://capflow" {
		t.Fatalf("s3 store: %+v", s)
	}
	exercise(t, s)
	d := Digest([]byte(`{"answer": 42}`))
	if _, err := os.Stat(filepath.Join(data, "capflow", "runs", Key(d))); err != nil {
		t.Fatalf("the artifact is not where the server keeps it: %v\n%s", err, out.String())
	}
	// Wrong credentials: refused by the server, not a missing artifact.
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong")
	bad, _ := Open(context.Background(), Options{URL: fmt.Sprintf("s3://capflow?endpoint=http://%s&region=us-east-1&use_path_style=true", addr)})
	defer bad.Close()
	if _, err := bad.Put(context.Background(), []byte("y")); code(err) != caperr.DependencyUnavailable {
		t.Fatalf("wrong secret: %v", err)
	}
}
