package registry

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// manifests1000 writes 1,000 realistic manifests (schemas included) once.
func manifests1000(b *testing.B) string {
	b.Helper()
	root := b.TempDir()
	for i := 0; i < 1000; i++ {
		d := filepath.Join(root, "tools", fmt.Sprintf("tool-%04d", i))
		os.MkdirAll(d, 0o755)
		src := fmt.Sprintf(`name: tool-%04d
version: 1.%d.0
description: generated tool %d
capabilities: [dom%d.act%d, shared.cap]
input_schema:
  type: object
  required: [path]
  properties:
    path: {type: string}
    mode: {enum: [a, b, c]}
    n: {type: integer, minimum: 0}
output_schema:
  type: object
  required: [result]
  properties:
    result: {type: string}
entrypoint: {type: command, command: [./run.sh]}
dependencies:
  - {kind: binary, name: sh}
idempotent: true
priority: %d
timeouts: {start_to_close: 5m, heartbeat: 30s}
`, i, i%7, i, i%50, i, i%10)
		if err := os.WriteFile(filepath.Join(d, "tool.yaml"), []byte(src), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return root
}

// BenchmarkLoad1000Cold parses and validates every manifest (no cache).
func BenchmarkLoad1000Cold(b *testing.B) {
	root := manifests1000(b)
	o := Options{Root: root, ToolsDirs: []string{"tools"}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := Load(o)
		if err != nil || len(r.Tools) != 1000 || len(r.Problems) != 0 {
			b.Fatalf("%v %d %v", err, len(r.Tools), r.Problems)
		}
	}
}

// BenchmarkLoad1000Cached reads the registry cache in state_dir.
func BenchmarkLoad1000Cached(b *testing.B) {
	root := manifests1000(b)
	o := Options{Root: root, ToolsDirs: []string{"tools"}, StateDir: ".capflow/state"}
	if _, err := Load(o); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := Load(o)
		if err != nil || len(r.Tools) != 1000 {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoad1000Watched is a worker's load: a memo that watches the
// tools' folders answers without looking at the 1,000 manifests.
func BenchmarkLoad1000Watched(b *testing.B) {
	root := manifests1000(b)
	o := Options{Root: root, ToolsDirs: []string{"tools"}, KitsDirs: []string{"kits"}, StateDir: ".capflow/state", Memo: &Memo{}}
	for range 2 {
		if _, err := Load(o); err != nil {
			b.Fatal(err)
		}
	}
	if o.Memo.w == nil {
		b.Fatal("the memo does not watch: this would measure its looks")
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := Load(o)
		if err != nil || len(r.Tools) != 1000 {
			b.Fatal(err)
		}
	}
}
