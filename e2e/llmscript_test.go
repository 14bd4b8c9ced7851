package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// scripted is a model server speaking OpenAI's chat completions and
// Anthropic's Messages, answering each script's requests in turn with
// the answers a test gave it. A request names its script in its goal
// ("[script NAME]"), so tests beside each other share one server.
type scripted struct {
	srv     *httptest.Server
	mu      sync.Mutex
	scripts map[string][]answer
	seen    map[string][]string // each request's body, by script
}

// answer is one model answer: function calls, or text.
type answer struct {
	calls  []fcall
	text   string
	delay  time.Duration // before it is sent (a call in flight)
	status int           // an HTTP error instead of an answer
}

type fcall struct{ name, args string }

func calls(cs ...fcall) answer           { return answer{calls: cs} }
func fn(name, args string) fcall         { return fcall{name, args} }
func finishWith(args string) answer      { return calls(fn("finish", args)) }
func textAnswer(s string) answer         { return answer{text: s} }
func scriptTag(name string) string       { return "[script " + name + "]" }
func (s *scripted) openaiURL() string    { return s.srv.URL + "/v1" }
func (s *scripted) anthropicURL() string { return s.srv.URL }

// echoKey is an answer's text that the server replaces by the request's key.
const echoKey = "ECHO THE KEY"

var scriptRE = regexp.MustCompile(`\[script ([a-z0-9-]+)\]`)

func newScripted(t *testing.T) *scripted {
	s := &scripted{scripts: map[string][]answer{}, seen: map[string][]string{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *scripted) script(name string, answers ...answer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scripts[name] = answers
}

// requests are the bodies a script's requests sent, in order.
func (s *scripted) requests(name string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen[name]...)
}

func (s *scripted) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m := scriptRE.FindSubmatch(body)
	if m == nil {
		http.Error(w, `{"error":{"message":"no script named"}}`, http.StatusBadRequest)
		return
	}
	name := string(m[1])
	s.mu.Lock()
	n := len(s.seen[name])
	s.seen[name] = append(s.seen[name], string(body))
	answers := s.scripts[name]
	s.mu.Unlock()
	a := textAnswer("the script has no more answers")
	if n < len(answers) {
		a = answers[n]
	}
	if a.text == echoKey {
		// An endpoint that echoes the request: its key with it.
		a.text = "you sent " + r.Header.Get("Authorization") + r.Header.Get("X-Api-Key")
	}
	select {
	case <-time.After(a.delay):
	case <-r.Context().Done():
		return
	}
	if a.status != 0 {
		http.Error(w, `{"error":{"message":"scripted failure"}}`, a.status)
		return
	}
	var out any
	switch r.URL.Path {
	case "/v1/chat/completions":
		out = openaiAnswer(n, a)
	case "/v1/messages":
		out = anthropicAnswer(n, a)
	default:
		http.NotFound(w, r)
		return
	}
	b, _ := json.Marshal(out)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func openaiAnswer(n int, a answer) map[string]any {
	msg := map[string]any{"role": "assistant", "content": a.text}
	reason := "stop"
	if len(a.calls) > 0 {
		var tcs []any
		for i, c := range a.calls {
			tcs = append(tcs, map[string]any{"id": fmt.Sprintf("call_%d_%d", n, i), "type": "function", "function": map[string]any{"name": c.name, "arguments": c.args}})
		}
		msg["tool_calls"], msg["content"], reason = tcs, nil, "tool_calls"
	}
	return map[string]any{"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": 1, "model": "scripted",
		"choices": []any{map[string]any{"index": 0, "finish_reason": reason, "message": msg}},
		"usage":   map[string]any{"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}}
}

func anthropicAnswer(n int, a answer) map[string]any {
	var content []any
	if a.text != "" {
		content = append(content, map[string]any{"type": "text", "text": a.text})
	}
	for i, c := range a.calls {
		var input any
		_ = json.Unmarshal([]byte(c.args), &input)
		content = append(content, map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d_%d", n, i), "name": c.name, "input": input})
	}
	reason := "end_turn"
	if len(a.calls) > 0 {
		reason = "tool_use"
	}
	return map[string]any{"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant", "model": "scripted-claude", "stop_reason": reason,
		"content": content, "usage": map[string]any{"input_tokens": 1000, "output_tokens": 100}}
}

// toolResults are the tool messages' contents of a request, both
// protocols.
func toolResults(body string) []string {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal([]byte(body), &req)
	var out []string
	for _, m := range req.Messages {
		if m.Role == "tool" {
			var s string
			_ = json.Unmarshal(m.Content, &s)
			out = append(out, s)
			continue
		}
		var blocks []struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(m.Content, &blocks) == nil {
			for _, b := range blocks {
				if b.Type == "tool_result" {
					out = append(out, strings.TrimSpace(string(b.Content)))
				}
			}
		}
	}
	return out
}
