package step

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/capflow/capflow/internal/artifacts"
	"github.com/capflow/capflow/internal/cache"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/project"
	"github.com/capflow/capflow/internal/toolrun"
	"github.com/capflow/capflow/internal/wfapi"
)

// naming writes one 4 MiB file in its step folder, a hard link to it, and
// names it 40 times, spelled in several ways and by the link.
type naming struct{}

func (naming) Run(_ context.Context, req toolrun.Request) envelope.Envelope {
	_ = os.MkdirAll(req.Workdir, 0o755)
	big := filepath.Join(req.Workdir, "big.bin")
	_ = os.WriteFile(big, make([]byte, 4<<20), 0o644)
	_ = os.Link(big, filepath.Join(req.Workdir, "link.bin"))
	var names []any
	for i := range 10 {
		dir := filepath.Join(req.Workdir, "x"+strconv.Itoa(i))
		names = append(names, big, filepath.Join(req.Workdir, ".", "big.bin"), dir+"/../big.bin", filepath.Join(req.Workdir, "link.bin"))
		_ = os.Mkdir(dir, 0o755)
	}
	return envelope.NewBuilder(req.Manifest.Name).Succeed("ok", map[string]any{"files": names})
}

// A file a step's data names again, by another spelling or a hard link, is
// read and stored once, and each name keeps its own place and path (one
// 8 MiB file named 1,000 ways read 8 GB, found re-attacking issue 57).
func TestAFileNamedManyWaysIsStoredOnce(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "tools", "names"), 0o755)
	os.WriteFile(filepath.Join(root, "tools", "names", "tool.yaml"), []byte(`name: names
version: 1.0.0
description: names one file many ways
capabilities: [test.names]
input_schema: {type: object}
output_schema: {type: object, properties: {files: {type: array, items: {type: string, format: path}}}}
entrypoint: {type: command, command: [./run.sh]}
idempotent: true
`), 0o644)
	e, store := executorOf(t, root, naming{})
	store.Shared = true // every output file goes to the store
	reg, _ := e.Registry()
	m := reg.Tool("names", "")
	if m == nil {
		t.Fatalf("no names: %v", reg.Problems)
	}
	in := wfapi.RunToolInput{WorkflowID: "r", RunDir: e.RunDir("r"), Step: wfapi.StepCall{ID: "a", Tool: m.Name, Version: m.Version, Digest: m.Digest, Idempotent: true, With: map[string]any{}}}
	before := readBytes(t)
	res, err := e.Run(context.Background(), in, Attempt{Number: 1, Max: 1})
	read := readBytes(t) - before
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]bool{}
	pointers := map[string]bool{}
	for _, a := range res.Artifacts {
		sums[a.SHA256], pointers[a.Pointer] = true, true
	}
	// Two reads of the file at most (its digest and its copy), not 40.
	if len(res.Artifacts) != 40 || len(sums) != 1 || len(pointers) != 40 || read > 12<<20 {
		t.Fatalf("%d artifacts, %d digests, %d places, %d bytes read", len(res.Artifacts), len(sums), len(pointers), read)
	}
}

// readBytes is what this process has read so far (/proc/self/io rchar).
func readBytes(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "rchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	t.Fatal("no rchar in /proc/self/io")
	return 0
}

// executorOf is an executor of the project at root whose tools all run as
// tool, with a file artifact store of the test's.
func executorOf(t *testing.T, root string, tool Tool) (*Executor, *artifacts.Store) {
	t.Helper()
	cfg, err := config.Load(config.Options{Project: root})
	if err != nil {
		t.Fatal(err)
	}
	store, err := artifacts.Open(context.Background(), artifacts.Options{URL: "file://" + filepath.Join(t.TempDir(), "store"), StateDir: filepath.Join(root, ".capflow")})
	if err != nil {
		t.Fatal(err)
	}
	return &Executor{Project: project.New(cfg, nil, nil), Logger: hclog.NewNullLogger(), Artifacts: store, Tool: tool}, store
}

// A cached result whose data names one file many times writes it once
// when it is restored, and every name points at that copy.
func TestACachedFileIsRestoredOnce(t *testing.T) {
	root := t.TempDir()
	e, store := executorOf(t, root, naming{})
	file, err := store.Put(context.Background(), []byte("the file"))
	if err != nil {
		t.Fatal(err)
	}
	names := []any{"/a/big.bin", "/b/big.bin", "/c/other-name.bin"}
	data, _ := json.Marshal(map[string]any{"files": names})
	sum, err := store.Put(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	ent := &cache.Entry{Data: sum}
	for i, n := range names {
		ent.Artifacts = append(ent.Artifacts, wfapi.Artifact{Pointer: "/files/" + strconv.Itoa(i), Path: n.(string), SHA256: file, Bytes: 8})
	}
	stepDir := filepath.Join(t.TempDir(), "step")
	got, arts, err := e.restore(context.Background(), ent, stepDir)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := os.ReadDir(filepath.Join(stepDir, "artifacts"))
	restored := got.(map[string]any)["files"].([]any)
	if len(files) != 1 || len(arts) != 3 || restored[0] != restored[2] || arts[1].Path != restored[1] {
		t.Fatalf("%d files written, artifacts %+v, data %v", len(files), arts, restored)
	}
}
