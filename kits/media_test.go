package kits

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/toolrun"
)

// stubFFmpeg puts an ffmpeg on PATH that copies its input to its last
// argument, or fails when the input is named "broken.*": the media tools
// are real subprocesses, only the codec is stubbed.
func stubFFmpeg(t *testing.T) {
	dir := t.TempDir()
	script := `#!/bin/sh
in=""; prev=""
for a in "$@"; do [ "$prev" = "-i" ] && in="$a"; prev="$a"; last="$a"; done
case "$in" in *broken*) echo "Invalid data found when processing input" >&2; exit 1;; esac
cp "$in" "$last"
`
	if err := os.WriteFile(filepath.Join(dir, "ffmpeg"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

func mediaTool(t *testing.T, name string) *manifest.Manifest {
	t.Helper()
	dir := filepath.Join("media", name)
	b, err := os.ReadFile(filepath.Join(dir, "tool.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	m, probs := manifest.Parse(dir+"/tool.yaml", abs, b)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	m.Digest = ""
	return m
}

func TestMediaTools(t *testing.T) {
	stubFFmpeg(t)
	root := t.TempDir()
	for _, f := range []string{"talk.webm", "broken.webm"} {
		os.WriteFile(filepath.Join(root, f), []byte("not really a video"), 0o644)
	}
	tests := []struct {
		tool    string
		inputs  map[string]any
		success bool
		code    caperr.Code
		want    string
	}{
		{"video-convert", map[string]any{"input": "talk.webm"}, true, "", "talk.mp4"},
		{"video-convert", map[string]any{"input": "talk.webm", "format": "mkv", "output": "out/x.mkv"}, false, caperr.ToolFailure, "ffmpeg failed"}, // out/ does not exist: ffmpeg (cp) fails
		{"video-convert", map[string]any{"input": "broken.webm"}, false, caperr.ToolFailure, "Invalid data found"},
		{"video-convert", map[string]any{"input": "missing.webm"}, false, caperr.InvalidInput, "does not exist"},
		{"video-convert", map[string]any{"input": "talk.webm", "format": "avi"}, false, caperr.SchemaViolation, "must be one of"},
		{"image-thumbnail", map[string]any{"input": "talk.webm", "width": int64(64)}, true, "", "talk.thumb.png"},
	}
	for _, tt := range tests {
		t.Run(tt.tool+" "+tt.want, func(t *testing.T) {
			env := (&toolrun.Runner{}).Run(context.Background(), toolrun.Request{Manifest: mediaTool(t, tt.tool), Inputs: tt.inputs,
				Root: root, Workdir: filepath.Join(t.TempDir(), "step"), StepID: "s"})
			if errs := envelope.Validate(&env); len(errs) > 0 {
				t.Fatalf("invalid envelope: %v", errs)
			}
			if env.Success != tt.success || (!tt.success && env.Error.Code != tt.code) {
				t.Fatalf("%+v %+v", env, env.Error)
			}
			all := env.Message
			for _, f := range env.Feedback {
				all += "\n" + f.Message + "\n" + f.Detail
			}
			if tt.success {
				out := env.Data.(map[string]any)["output"].(string)
				if !strings.HasSuffix(out, tt.want) {
					t.Fatalf("output %s", out)
				}
				if _, err := os.Stat(out); err != nil || !strings.Contains(out, "/step/") {
					t.Fatalf("no output file: %v", err)
				}
			} else if !strings.Contains(all, tt.want) {
				t.Fatalf("want %q in:\n%s", tt.want, all)
			}
		})
	}
}
