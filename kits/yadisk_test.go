package kits

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/egress"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/toolrun"
)

// fakeYandexDisk answers the disk's public API as Yandex does: a file
// link, a folder link (files inside by path), anything else not found.
func fakeYandexDisk(t *testing.T, content []byte) *httptest.Server {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, p := r.URL.Query().Get("public_key"), r.URL.Query().Get("path")
		answer := func(code int, v any) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(v)
		}
		file := key == "https://disk.yandex.ru/d/file1" || (key == "https://yadi.sk/d/folder1" && p == "/report.pdf")
		switch {
		case r.URL.Path == "/files/report.pdf":
			_, _ = w.Write(content)
		case key == "https://yadi.sk/d/folder1" && p == "" && r.URL.Path == "/v1/disk/public/resources":
			answer(200, map[string]any{"type": "dir", "name": "shared"})
		case file && r.URL.Path == "/v1/disk/public/resources":
			answer(200, map[string]any{"type": "file", "name": "report.pdf", "size": len(content)})
		case file && r.URL.Path == "/v1/disk/public/resources/download":
			answer(200, map[string]any{"href": srv.URL + "/files/report.pdf", "method": "GET"})
		default:
			answer(404, map[string]any{"error": "DiskNotFoundError", "description": "Resource not found."})
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// yadisk-download fetches a public link's file through the public API (a
// local fake of it), into the step folder; what it cannot fetch fails
// with a code that says whether to retry.
func TestYandexDiskPublicLinks(t *testing.T) {
	content := []byte(strings.Repeat("pdf bytes ", 1000))
	srv := fakeYandexDisk(t, content)
	t.Setenv("CAPFLOW_YADISK_API", srv.URL)
	// The fake is on this machine's loopback, which a run reaches only
	// where the policy allows it.
	lo, _ := egress.ParseEntry("127.0.0.1")
	allowed := &egress.Rules{Allow: []egress.Entry{lo}}
	for _, c := range []struct {
		name   string
		inputs map[string]any
		code   caperr.Code
		want   string
	}{
		{"a file's link", map[string]any{"url": "https://disk.yandex.ru/d/file1"}, "", "report.pdf"},
		{"a file in a shared folder, into dest", map[string]any{"url": "https://yadi.sk/d/folder1", "path": "/report.pdf", "dest": "загрузки"}, "", "загрузки/report.pdf"},
		{"a folder without path", map[string]any{"url": "https://yadi.sk/d/folder1"}, caperr.InvalidInput, "is a shared folder: give path"},
		{"not found", map[string]any{"url": "https://disk.yandex.ru/d/gone"}, caperr.InvalidInput, "HTTP 404"},
		{"dest leaving the step folder", map[string]any{"url": "https://disk.yandex.ru/d/file1", "dest": "../../x"}, caperr.InvalidInput, "leaves the step folder"},
	} {
		t.Run(c.name, func(t *testing.T) {
			step := filepath.Join(t.TempDir(), "step")
			env := (&toolrun.Runner{}).Run(context.Background(), toolrun.Request{Manifest: mediaTool(t, "yadisk-download"), Inputs: c.inputs,
				Root: t.TempDir(), Workdir: step, StepID: "s", Net: allowed})
			if errs := envelope.Validate(&env); len(errs) > 0 {
				t.Fatalf("invalid envelope: %v", errs)
			}
			if c.code != "" {
				if env.Success || env.Error.Code != c.code || !strings.Contains(env.Message, c.want) {
					t.Fatalf("%+v %s", env.Error, env.Message)
				}
				return
			}
			d, _ := env.Data.(map[string]any)
			path, _ := d["path"].(string)
			got, err := os.ReadFile(path)
			if !env.Success || path != filepath.Join(step, c.want) || err != nil || string(got) != string(content) || d["bytes"] != float64(len(content)) {
				t.Fatalf("%s: %v %+v %v", env.Message, d, env.Error, err)
			}
		})
	}
}
