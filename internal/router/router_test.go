package router

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/kits"
)

func shipped(t *testing.T) *Rules {
	t.Helper()
	r, err := ParseRules("kits/router.yaml", kits.DefaultRouterRules, "")
	if err != nil {
		t.Fatalf("shipped rules do not compile: %v", err)
	}
	return r
}

func TestExtract(t *testing.T) {
	e := Extract("  Скачай https://youtu.be/AbC123 и положи в папку Videos на Google Drive!  ")
	if e.URL() != "https://youtu.be/AbC123" || e.Folder != "Videos" || !strings.Contains(e.Text, "url:youtu.be") || strings.Contains(e.Text, "abc123") {
		t.Fatalf("%+v", e)
	}
	e = Extract("convert talk.webm and demo.WEBM to mp4")
	if len(e.Files) != 2 || e.Files[0] != "talk.webm" || e.Mode != "selected" {
		t.Fatalf("%+v", e)
	}
	e = Extract("convert all .webm files in media/raw/ to mp4")
	if e.Mode != "all" || e.Dir != "media/raw" {
		t.Fatalf("%+v", e)
	}
}

func TestShippedRules(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "rec"), 0o755)
	for _, f := range []string{"a.webm", "b.webm", "c.mp4"} {
		os.WriteFile(filepath.Join(root, "rec", f), []byte("x"), 0o644)
	}
	r := &Router{Rules: shipped(t), Root: root}
	tests := []struct {
		request string
		intent  string
		caps    string // capabilities of the steps, in order
		has     string // a fragment of the plan YAML
	}{
		{"Download https://www.youtube.com/watch?v=x1 and put it on my drive in folder clips", "video-to-drive", "media.download,storage.upload", `folder: "clips"`},
		{"Скачай видео https://youtu.be/x и загрузи на диск", "video-to-drive", "media.download,storage.upload", `url: "https://youtu.be/x"`},
		{"download this video https://youtu.be/x", "video-download", "media.download", "media.download"},
		{"grab https://disk.yandex.ru/d/abc please", "public-disk-download", "yadisk.download", "disk.yandex.ru/d/abc"},
		{"convert all webm in rec/ to mp4", "webm-to-mp4", "file.list,video.convert", `for_each: "${steps.find.data.files}"`},
		{"convert all webm files in ./incoming to mp4", "webm-to-mp4", "file.list,video.convert", `dir: "incoming"`},
		{"перекодируй talk.webm в mp4", "webm-to-mp4", "video.convert", `input: "talk.webm"`},
		{"upload report.pdf and notes.txt to the drive", "drive-upload", "storage.upload,storage.upload", `file: "notes.txt"`},
		{"what is the sha256 of go.sum?", "checksum", "file.checksum", `path: "go.sum"`},
		{"unzip release.zip into out/", "extract-archive", "archive.extract", `dest: "out"`},
		{"zip everything in docs/ please", "create-archive", "archive.create,file.checksum", `source: "docs"`},
		{"fetch https://example.com/api/status", "fetch-url", "http.request", "method: GET"},
		{"list the files in plans/examples/", "list-files", "file.list", `dir: "plans/examples"`},
		// The same rules in Russian: Go's \b is ASCII only, so words like
		// "все" and "в" need Unicode-aware boundaries.
		{"скачай видео https://www.youtube.com/watch?v=x1 и положи на гугл диск в папку клипы", "video-to-drive", "media.download,storage.upload", `folder: "клипы"`},
		{"скачай ролик https://youtu.be/x", "video-download", "media.download", `url: "https://youtu.be/x"`},
		{"скачай с яндекс диска https://disk.yandex.ru/d/abc в загрузки/", "public-disk-download", "yadisk.download", `dest: "загрузки"`},
		{"конвертируй все webm из incoming/ в mp4", "webm-to-mp4", "file.list,video.convert", `dir: "incoming"`},
		{"конвертируй всё webm в rec/ в mp4", "webm-to-mp4", "file.list,video.convert", `dir: "rec"`},
		{"загрузи отчёт.pdf на диск", "drive-upload", "storage.upload", `file: "отчёт.pdf"`},
		{"Скачай http://127.0.0.1:8000/clip.webm и положи на Яндекс Диск", "video-to-yandex-disk", "media.download,storage.upload", "remote: yadisk"},
		{"посчитай хеш go.sum", "checksum", "file.checksum", `path: "go.sum"`},
		{"распакуй archive.zip в out/", "extract-archive", "archive.extract", `dest: "out"`},
		{"упакуй в архив всё из docs/", "create-archive", "archive.create,file.checksum", `source: "docs"`},
		{"получи https://example.com/api/status", "fetch-url", "http.request", "method: GET"},
		{"покажи список файлов в plans/examples/", "list-files", "file.list", `dir: "plans/examples"`},
	}
	for _, tt := range tests {
		t.Run(tt.intent+" "+tt.request, func(t *testing.T) {
			res, err := r.Route(context.Background(), tt.request)
			if err != nil {
				t.Fatal(err)
			}
			if res.Plan == nil || res.ID != tt.intent || res.Kind != KindRule {
				t.Fatalf("%q routed to %q (%s)", tt.request, res.ID, res.Message)
			}
			var caps []string
			for _, s := range res.Plan.Steps {
				caps = append(caps, s.Capability)
			}
			if strings.Join(caps, ",") != tt.caps || !strings.Contains(res.PlanYAML, tt.has) {
				t.Fatalf("%s:\n%s", strings.Join(caps, ","), res.PlanYAML)
			}
		})
	}
}

func TestNoRoute(t *testing.T) {
	r := &Router{Rules: shipped(t), Root: t.TempDir()}
	res, err := r.Route(context.Background(), "please translate this poem about a video and a drive")
	if err != nil || res.Plan != nil {
		t.Fatalf("%v %+v", err, res)
	}
	if !strings.Contains(res.Message, "no route") || len(res.Closest) == 0 || !strings.Contains(res.Message, "closest intents: ") {
		t.Fatalf("%+v", res)
	}
	// mode all is a run-time fan-out: a folder that is empty (or not
	// there yet) still gives a plan; naming no file in mode selected does not.
	res, _ = r.Route(context.Background(), "convert all webm in nowhere/ to mp4")
	if res.Plan == nil || res.Plan.Steps[1].ForEach == nil {
		t.Fatalf("%+v", res)
	}
	res, _ = r.Route(context.Background(), "convert the webm recordings to mp4")
	if res.Plan != nil || !strings.Contains(res.Message, "webm-to-mp4 matched but found no .webm files") {
		t.Fatalf("%+v", res)
	}
	res, _ = r.Route(context.Background(), "download the video and put it on the drive")
	if res.Plan != nil || !strings.Contains(res.Message, "names no url") {
		t.Fatalf("%+v", res)
	}
}

func TestBadRules(t *testing.T) {
	_, err := ParseRules("router.yaml", []byte("intents:\n  - id: a\n    match: {any: ['(']}\n    plan: 'x'\n  - id: b\n    match: {any: [x]}\n    plan: '{{ .Nope '\n  - {id: a, match: {all: [y]}, plan: z}\n  - {id: c, plan: z, match: {}}\n"), "")
	all := err.Error()
	for _, w := range []string{"router.yaml:3:", "invalid pattern", "router.yaml:7:", "invalid plan template", `duplicate intent id "a"`, "at least one"} {
		if !strings.Contains(all, w) {
			t.Errorf("missing %q in:\n%s", w, all)
		}
	}
	if caperr.CodeOf(err.(caperr.Problems)[0]) != caperr.ConfigError {
		t.Fatal("rules problems are CONFIG_ERROR")
	}
}

// fakeLLM is a chat-completions server whose answers a test scripts.
type fakeLLM struct {
	answers []func(w http.ResponseWriter)
	calls   atomic.Int32
	auth    atomic.Value
	system  atomic.Value
}

func (f *fakeLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := int(f.calls.Add(1)) - 1
	f.auth.Store(r.Header.Get("Authorization"))
	if r.URL.Path != "/v1/chat/completions" {
		w.WriteHeader(404)
		return
	}
	var req struct {
		Messages []struct{ Role, Content string } `json:"messages"`
	}
	json.NewDecoder(r.Body).Decode(&req)
	if len(req.Messages) > 0 {
		f.system.Store(req.Messages[0].Content)
	}
	if n >= len(f.answers) {
		n = len(f.answers) - 1
	}
	f.answers[n](w)
}

func content(c string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		b, _ := json.Marshal(map[string]any{"id": "chatcmpl-test", "object": "chat.completion", "model": "test-model",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": c}}}})
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	}
}

func status(code int) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = w.Write([]byte(`{"error":{"message":"scripted","type":"test"}}`))
	}
}

func hang(w http.ResponseWriter) { time.Sleep(2 * time.Second) }

const goodPlan = `{"name":"summarise","steps":[{"id":"read","capability":"file.read","with":{"path":"README.md"},"coverage_confidence":0.9,"coverage_rationale":"reading is file.read"},{"id":"sum","capability":"file.checksum","with":{"path":"README.md"},"needs":["read"],"coverage_confidence":0.8,"coverage_rationale":"x"}]}`

func TestLLMFallback(t *testing.T) {
	tests := []struct {
		name     string
		answers  []func(http.ResponseWriter)
		max      int
		wantErr  caperr.Code
		wantCall int
		check    func(t *testing.T, res *Result)
	}{
		{"good answer", []func(http.ResponseWriter){content(goodPlan)}, 3, "", 1, func(t *testing.T, res *Result) {
			if res.Kind != KindLLM || len(res.Plan.Steps) != 2 || *res.Plan.Steps[0].CoverageConfidence != 0.9 || !strings.Contains(res.PlanYAML, "coverage_rationale") {
				t.Fatalf("%+v\n%s", res, res.PlanYAML)
			}
		}},
		{"malformed JSON, then good", []func(http.ResponseWriter){content("Sure! here is {not json"), content(goodPlan)}, 3, "", 2, nil},
		{"5xx, then good", []func(http.ResponseWriter){status(503), content(goodPlan)}, 3, "", 2, nil},
		{"missing confidence fails closed", []func(http.ResponseWriter){content(`{"name":"x","steps":[{"id":"a","capability":"file.read","with":{"path":"x"}}]}`)}, 3, "", 1, func(t *testing.T, res *Result) {
			if c := res.Plan.Steps[0].CoverageConfidence; c == nil || *c != 0 {
				t.Fatalf("confidence %v", c)
			}
		}},
		{"unknown capability is kept for the gap check", []func(http.ResponseWriter){content(`{"name":"x","steps":[{"id":"a","capability":"teleport.now","coverage_confidence":0.95}]}`)}, 3, "", 1, func(t *testing.T, res *Result) {
			if res.Plan.Steps[0].Capability != "teleport.now" {
				t.Fatal("capability rewritten")
			}
		}},
		{"retries exhausted", []func(http.ResponseWriter){content("nope")}, 2, caperr.RetryExhausted, 2, nil},
		{"timeouts count as calls", []func(http.ResponseWriter){hang}, 2, caperr.RetryExhausted, 2, nil},
		{"bad key is not retried", []func(http.ResponseWriter){status(401)}, 3, caperr.ConfigError, 1, nil},
		{"policy allows no calls", []func(http.ResponseWriter){content(goodPlan)}, 0, caperr.PolicyBlocked, 0, nil},
		{"an endpoint echoing the key", []func(http.ResponseWriter){content(`{"name":"echo","description":"auth was Bearer sk-very-secret-key","steps":[{"id":"a","capability":"file.read","with":{"path":"sk-very-secret-key","h":"\u0073k-very-secret-key"},"coverage_confidence":0.95}]}`)}, 3, "", 1, func(t *testing.T, res *Result) {
			if strings.Contains(res.PlanYAML, "sk-very-secret-key") || strings.Contains(fmt.Sprint(res.PlanValue), "sk-very-secret-key") {
				t.Fatalf("the key reached the route's data:\n%s", res.PlanYAML)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeLLM{answers: tt.answers}
			srv := httptest.NewServer(f)
			defer srv.Close()
			var log bytes.Buffer
			r := &Router{Rules: shipped(t), MaxLLMCalls: tt.max, Catalog: func() []Capability {
				return []Capability{{Name: "file.read", Description: "Read a file", InputSchema: map[string]any{"type": "object", "required": []any{"path"}}}, {Name: "file.checksum"}}
			},
				LLM: &LLM{BaseURL: srv.URL + "/v1", Model: "test-model", APIKey: "sk-very-secret-key", Timeout: 300 * time.Millisecond, Log: &log}}
			res, err := r.Route(context.Background(), "summarise the readme for me")
			if tt.wantErr != "" {
				if caperr.CodeOf(err) != tt.wantErr {
					t.Fatalf("err = %v, want %s", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if int(f.calls.Load()) != tt.wantCall || (res != nil && res.LLMCalls != tt.wantCall && tt.max > 0) {
				t.Fatalf("calls = %d (result says %d), want %d", f.calls.Load(), res.LLMCalls, tt.wantCall)
			}
			if tt.check != nil {
				tt.check(t, res)
			}
			if sys, _ := f.system.Load().(string); tt.wantCall > 0 && (!strings.Contains(sys, `- file.read: Read a file; inputs {"required":["path"],"type":"object"}`) || !strings.Contains(sys, "- file.checksum")) {
				t.Fatalf("the LLM was not shown the capabilities with their input schemas:\n%s", sys)
			}
			if tt.wantCall > 0 && f.auth.Load() != "Bearer sk-very-secret-key" {
				t.Fatal("the API key was not sent")
			}
			if strings.Contains(log.String(), "sk-very-secret-key") {
				t.Fatal("LLM_LOG printed the API key")
			}
			if tt.wantCall > 0 && (!strings.Contains(log.String(), "=== llm-") || !strings.Contains(log.String(), "request ===")) {
				t.Fatalf("LLM_LOG lacks call sections:\n%s", log.String())
			}
		})
	}
}

// A key variable named and unset: no call is made, and the error says
// which variable.
func TestLLMKeyVariableUnset(t *testing.T) {
	f := &fakeLLM{answers: []func(http.ResponseWriter){content(goodPlan)}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	l := &LLM{BaseURL: srv.URL + "/v1", Model: "m", KeyEnv: "CAPFLOW_TEST_UNSET_KEY"}
	_, _, calls, err := l.Plan(context.Background(), "do it", nil, 3)
	if caperr.CodeOf(err) != caperr.ConfigError || calls != 0 || f.calls.Load() != 0 || !strings.Contains(err.Error(), "api_key_env names CAPFLOW_TEST_UNSET_KEY, which is not set") {
		t.Fatalf("%d calls (%d made): %v", calls, f.calls.Load(), err)
	}
}

func TestRulesWinBeforeLLM(t *testing.T) {
	f := &fakeLLM{answers: []func(http.ResponseWriter){content(goodPlan)}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	r := &Router{Rules: shipped(t), MaxLLMCalls: 3, LLM: &LLM{BaseURL: srv.URL + "/v1", Model: "m"}}
	res, err := r.Route(context.Background(), "sha256 of go.mod")
	if err != nil || res.Kind != KindRule || f.calls.Load() != 0 {
		t.Fatalf("the LLM must only be asked when no rule matches: %v %+v calls=%d", err, res, f.calls.Load())
	}
}

func TestExtractEveryFile(t *testing.T) {
	e := Extract("convert a.webm b.webm c.webm d.webm to mp4")
	if got := strings.Join(e.Files, ","); got != "a.webm,b.webm,c.webm,d.webm" {
		t.Fatalf("files: %s", got)
	}
	e = Extract(`compress "x.txt", y.txt; z.tar.gz and v1.2.webmxyz`)
	if got := strings.Join(e.Files, ","); got != "x.txt,y.txt,z.tar.gz" {
		t.Fatalf("files: %s", got)
	}
}

func TestRequestOutsideProjectIsBadInput(t *testing.T) {
	r := &Router{Rules: shipped(t), Root: t.TempDir()}
	_, err := r.Route(context.Background(), "convert all .webm in ../../outside/ to mp4")
	if caperr.CodeOf(err) != caperr.InvalidInput || !strings.Contains(err.Error(), "outside the project") {
		t.Fatalf("want INVALID_INPUT blaming the request, got %v", err)
	}
}

// A signal during an LLM call (the caller's context ends) is CANCELLED and
// not retried, whether it comes before the answer's headers or while its
// body arrives; a call's own timeout says so.
func TestLLMCallInterrupted(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	halfAnswer := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices": [`))
		w.(http.Flusher).Flush()
		<-release
	}
	silent := func(w http.ResponseWriter, r *http.Request) { <-release }
	for name, h := range map[string]http.HandlerFunc{"before the headers": silent, "during the body": halfAnswer} {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close) // after release is closed (deferred)
		l := &LLM{BaseURL: srv.URL, Model: "m", Timeout: 5 * time.Second}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, _, calls, err := l.Plan(ctx, "do it", nil, 3)
		cancel()
		if caperr.CodeOf(err) != caperr.Cancelled || calls != 1 {
			t.Errorf("%s: %d call(s), %v", name, calls, err)
		}
		l.Timeout = 200 * time.Millisecond
		_, _, _, err = l.Plan(context.Background(), "do it", nil, 1)
		if !strings.Contains(fmt.Sprint(err), "timed out after 200ms (router.llm.timeout)") {
			t.Errorf("%s: the timeout is not named: %v", name, err)
		}
	}
}
