package llm

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/capflow/capflow/internal/caperr"
)

// server is a provider's endpoint the test scripts: it keeps each request
// (its path, headers and JSON body) and answers with the next answer.
type server struct {
	mu       sync.Mutex
	requests []recorded
	answers  []answer
}

type recorded struct {
	path   string
	header http.Header
	body   map[string]any
}

type answer struct {
	status int
	body   string
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	s.mu.Lock()
	s.requests = append(s.requests, recorded{path: r.URL.Path, header: r.Header.Clone(), body: body})
	a := s.answers[min(len(s.requests), len(s.answers))-1]
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, a.body)
}

func serve(t *testing.T, answers ...answer) (*server, string) {
	s := &server{answers: answers}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv.URL
}

var checksum = Tool{Name: "file__checksum", Description: "sha256 of a file",
	Parameters: map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}, "required": []any{"path"}, "additionalProperties": false}}

// A conversation with a tool call and its result, as each provider's
// protocol carries it.
var conversation = Request{System: "you check files", Tools: []Tool{checksum}, Messages: []Message{
	{Role: RoleUser, Content: "checksum a.txt and b.txt"},
	{Role: RoleAssistant, Calls: []Call{{ID: "c1", Name: "file__checksum", Arguments: `{"path":"a.txt"}`}, {ID: "c2", Name: "file__checksum", Arguments: `{"path":"b.txt"}`}}},
	{Role: RoleTool, CallID: "c1", Content: `{"sha256":"aa"}`},
	{Role: RoleTool, CallID: "c2", Content: `{"sha256":"bb"}`},
}}

// OpenAI's chat completions: the functions offered with their schemas,
// the key as a bearer token, tool calls and usage read back.
func TestOpenAIToolCalls(t *testing.T) {
	s, url := serve(t, answer{200, `{"id":"chatcmpl-1","object":"chat.completion","model":"m-1","choices":[{"index":0,"finish_reason":"tool_calls",
		"message":{"role":"assistant","content":"","tool_calls":[{"id":"c3","type":"function","function":{"name":"finish","arguments":"{\"largest\":\"b.txt\"}"}}]}}],
		"usage":{"prompt_tokens":120,"completion_tokens":30,"total_tokens":150}}`})
	c, err := New(Provider{Name: "local", BaseURL: url + "/v1", Model: "m-1"}, "sk-secret", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Complete(context.Background(), conversation)
	if err != nil {
		t.Fatal(err)
	}
	if res.ID != "chatcmpl-1" || len(res.Calls) != 1 || res.Calls[0] != (Call{ID: "c3", Name: "finish", Arguments: `{"largest":"b.txt"}`}) ||
		res.Usage != (Usage{InputTokens: 120, OutputTokens: 30}) {
		t.Fatalf("response: %+v", res)
	}
	r := s.requests[0]
	msgs, _ := r.body["messages"].([]any)
	tools, _ := r.body["tools"].([]any)
	if r.path != "/v1/chat/completions" || r.header.Get("Authorization") != "Bearer sk-secret" || r.body["model"] != "m-1" || len(msgs) != 5 || len(tools) != 1 {
		t.Fatalf("request %s %v: %v", r.path, r.header, r.body)
	}
	roles := []string{}
	for _, m := range msgs {
		roles = append(roles, m.(map[string]any)["role"].(string))
	}
	fn := tools[0].(map[string]any)["function"].(map[string]any)
	if strings.Join(roles, ",") != "system,user,assistant,tool,tool" || fn["name"] != "file__checksum" || fn["parameters"].(map[string]any)["required"].([]any)[0] != "path" {
		t.Fatalf("messages %v, tool %v", roles, fn)
	}
	if calls := msgs[2].(map[string]any)["tool_calls"].([]any); len(calls) != 2 || msgs[3].(map[string]any)["tool_call_id"] != "c1" {
		t.Fatalf("the assistant's calls and their results: %v", msgs)
	}
}

// Anthropic's Messages: the system apart, tools with input_schema, the
// results of one answer's calls in one user turn, the key as the SDK
// sends it (a bearer token).
func TestAnthropicToolUse(t *testing.T) {
	s, url := serve(t, answer{200, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","stop_reason":"tool_use",
		"content":[{"type":"text","text":"checking"},{"type":"tool_use","id":"tu1","name":"file__checksum","input":{"path":"c.txt"}}],
		"usage":{"input_tokens":200,"output_tokens":40}}`})
	c, err := New(Provider{Name: "claude", API: APIAnthropic, BaseURL: url, Model: "claude-x"}, "sk-ant-secret", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Complete(context.Background(), conversation)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "checking" || len(res.Calls) != 1 || res.Calls[0] != (Call{ID: "tu1", Name: "file__checksum", Arguments: `{"path":"c.txt"}`}) ||
		res.Usage != (Usage{InputTokens: 200, OutputTokens: 40}) {
		t.Fatalf("response: %+v", res)
	}
	r := s.requests[0]
	msgs, _ := r.body["messages"].([]any)
	tools, _ := r.body["tools"].([]any)
	if r.path != "/v1/messages" || r.header.Get("Authorization") != "Bearer sk-ant-secret" || len(msgs) != 3 || len(tools) != 1 {
		t.Fatalf("request %s %v: %v", r.path, r.header, r.body)
	}
	schema := tools[0].(map[string]any)["input_schema"].(map[string]any)
	results := msgs[2].(map[string]any)["content"].([]any)
	if schema["type"] != "object" || schema["additionalProperties"] != false || len(results) != 2 || results[1].(map[string]any)["tool_use_id"] != "c2" {
		t.Fatalf("schema %v, tool results %v", schema, results)
	}
}

// A refused key is the configuration's and not retried; a busy server is
// worth another call; an unknown protocol is refused before any call.
func TestErrorsSayWhatToDo(t *testing.T) {
	for _, c := range []struct {
		api    string
		status int
		code   caperr.Code
		retry  bool
	}{
		{APIOpenAI, 401, caperr.ConfigError, false}, {APIOpenAI, 503, caperr.DependencyUnavailable, true}, {APIOpenAI, 429, caperr.DependencyUnavailable, true},
		{APIOpenAI, 400, caperr.ConfigError, false}, {APIAnthropic, 403, caperr.ConfigError, false}, {APIAnthropic, 529, caperr.DependencyUnavailable, true},
	} {
		s, url := serve(t, answer{c.status, `{"error":{"message":"no","type":"x"}}`})
		cl, _ := New(Provider{Name: "p", API: c.api, BaseURL: url, Model: "m"}, "sk-secret", nil)
		_, err := cl.Complete(context.Background(), Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}})
		if caperr.CodeOf(err) != c.code || Retryable(err) != c.retry || len(s.requests) != 1 || strings.Contains(err.Error(), "sk-secret") {
			t.Errorf("%s HTTP %d: %v (%s, retry %v) after %d requests", c.api, c.status, err, caperr.CodeOf(err), Retryable(err), len(s.requests))
		}
	}
	if _, err := New(Provider{Name: "p", API: "gemini", Model: "m"}, "", nil); caperr.CodeOf(err) != caperr.ConfigError {
		t.Errorf("an unknown api: %v", err)
	}
}

func TestCost(t *testing.T) {
	p := Price{InputPerMTok: 3, OutputPerMTok: 15}
	if got := p.Cost(Usage{InputTokens: 1_000_000, OutputTokens: 200_000}); got != 6 {
		t.Fatalf("cost %v, want 6", got)
	}
}

// An answer past MaxAnswerBytes is not read whole: a hostile endpoint
// cannot fill the worker's memory.
func TestAnswersAreBounded(t *testing.T) {
	huge := `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"` +
		strings.Repeat("a", MaxAnswerBytes+1) + `"}}]}`
	_, url := serve(t, answer{200, huge})
	c, err := New(Provider{Name: "p", BaseURL: url, Model: "m"}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Complete(context.Background(), Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}})
	if err == nil || !strings.Contains(err.Error(), "past 4 MiB") || len(res.Text) > 0 {
		t.Fatalf("%v (%d bytes of text)", err, len(res.Text))
	}
}

// A key an endpoint echoes is masked in every string of the answer.
func TestRedactingMasksEveryString(t *testing.T) {
	key := "sk-echoed-key-1234"
	echo := Response{ID: "resp-" + key, Model: "m-" + key, Text: key, Raw: key, Calls: []Call{{ID: "c-" + key, Name: "f" + key, Arguments: `{"k":"` + key + `"}`}}}
	res, _ := Redacting(fixed{echo}, key).Complete(context.Background(), Request{})
	b, _ := json.Marshal(res)
	if strings.Contains(string(b)+res.Raw, key) {
		t.Fatalf("%s %s", b, res.Raw)
	}
}

type fixed struct{ r Response }

func (f fixed) Complete(context.Context, Request) (Response, error) { return f.r, nil }
