package e2e

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// transferProject is a copy of the test project with the media kit (whose
// media.download runs yt-dlp and storage.* rclone) and its own worker,
// started with env (the rclone remotes: configuration, never a plan's).
func transferProject(t *testing.T, queue string, env []string, allow ...string) string {
	t.Helper()
	for _, bin := range []string{"yt-dlp", "rclone"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is not installed (make transfer-tools): %v", bin, err)
		}
	}
	dir := projectCopy(t)
	cfg, err := os.ReadFile(filepath.Join(dir, "capflow.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg = bytes.Replace(cfg, []byte("active_kits: [core, runtime]"), []byte("active_kits: [core, runtime, media]"), 1)
	if !bytes.Contains(cfg, []byte("media]")) {
		t.Fatalf("the test project's active_kits changed:\n%s", cfg)
	}
	if err := os.WriteFile(filepath.Join(dir, "capflow.yaml"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	allowNetwork(t, dir, allow...)
	workerAt(t, dir, append(env, "CAPFLOW_TEMPORAL_TASK_QUEUE="+queue)...)
	return dir
}

// startWebDAV serves a folder over WebDAV on loopback with rclone itself:
// in this test, the "Google Drive".
func startWebDAV(t *testing.T, dir string) string {
	t.Helper()
	addr := freePort()
	cmd := exec.Command("rclone", "serve", "webdav", dir, "--addr", addr, "--config", "/dev/null")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "http://" + addr + "/"
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("rclone serve webdav did not start:\n%s", out.String())
	return ""
}

// The design notes' flagship request, offline: a video from a URL onto
// "Google Drive", which the project's rclone configuration maps to a
// WebDAV server on loopback. yt-dlp downloads it from a local HTTP
// server; the answer is in the request's language; the file is on the
// remote, byte for byte. Where no remote is configured, the gap report
// says what to set.
func TestAgentDownloadsAVideoToTheDrive(t *testing.T) {
	clip := make([]byte, 40000)
	_, _ = rand.Read(clip)
	media := t.TempDir()
	if err := os.WriteFile(filepath.Join(media, "clip.webm"), clip, 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(media))}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	drive := t.TempDir()
	env := []string{"RCLONE_CONFIG_GDRIVE_TYPE=webdav", "RCLONE_CONFIG_GDRIVE_URL=" + startWebDAV(t, drive), "RCLONE_CONFIG_GDRIVE_VENDOR=other"}
	// The local servers stand for the internet: this machine's loopback,
	// which a run reaches only where its policy says so.
	dir := transferProject(t, "capflow-transfer", env, ln.Addr().String(), strings.TrimSuffix(strings.TrimPrefix(env[1], "RCLONE_CONFIG_GDRIVE_URL=http://"), "/"))
	env = append(env, "CAPFLOW_TEMPORAL_TASK_QUEUE=capflow-transfer")

	request := fmt.Sprintf("Скачай http://%s/clip.webm и положи на Google Drive", ln.Addr())
	code, e, stderr := h.capflowAt(t, dir, env, "agent", request)
	var d agentData
	data(t, e, &d)
	if code != 0 || d.Headline != "Задача успешно выполнена" || caps(d.Done) != "download=media.download,upload=storage.upload" {
		t.Fatalf("exit %d: %+v\n%s", code, d, stderr)
	}
	got, err := os.ReadFile(filepath.Join(drive, "videos", "clip.webm"))
	if err != nil || !bytes.Equal(got, clip) {
		t.Fatalf("the file on the drive: %v (%d bytes, want %d)", err, len(got), len(clip))
	}
	// storage.list and storage.download see it there.
	plan := filepath.Join(dir, "back.yaml")
	_ = os.WriteFile(plan, []byte(`name: back
steps:
  - {id: list, capability: storage.list, with: {remote: gdrive, folder: videos}}
  - {id: get, capability: storage.download, needs: [list], with: {remote: gdrive, path: videos/clip.webm}}
outputs:
  names: ${steps.list.data.entries}
  bytes: ${steps.get.data.bytes}
`), 0o644)
	code, e, stderr = h.capflowAt(t, dir, env, "run", plan)
	var r runResult
	data(t, e, &r)
	if code != 0 || r.Status != "passed" || fmt.Sprint(r.Outputs["bytes"]) != "40000" || !strings.Contains(fmt.Sprint(r.Outputs["names"]), "clip.webm") {
		t.Fatalf("list and download: exit %d %s %s %v\n%s", code, r.Status, r.Message, r.Outputs, stderr)
	}

	// Yandex Disk is the remote "yadisk", which nothing configures here.
	code, e, _ = h.capflowAt(t, dir, env, "agent", fmt.Sprintf("Скачай http://%s/clip.webm и положи на Яндекс Диск", ln.Addr()))
	var no agentData
	data(t, e, &no)
	if code != 3 || no.Headline != "Задача не выполнена" || no.Route["id"] != "video-to-yandex-disk" || len(no.Gaps) != 1 ||
		!strings.Contains(fmt.Sprint(no.Gaps[0]["reason_message"]), `rclone remote "yadisk" is not configured`) ||
		!strings.Contains(fmt.Sprint(no.Gaps[0]["reason_message"]), "RCLONE_CONFIG_YADISK_TYPE") {
		t.Fatalf("without the remote: exit %d %+v", code, no)
	}
}
