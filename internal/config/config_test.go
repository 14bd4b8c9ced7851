package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/pflag"

	"github.com/capflow/capflow/internal/caperr"
)

func project(t *testing.T, yaml string) string {
	t.Helper()
	dir := t.TempDir()
	if yaml != "" {
		if err := os.WriteFile(filepath.Join(dir, FileName), []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestDefaults(t *testing.T) {
	c, err := Load(Options{Project: project(t, "")})
	if err != nil {
		t.Fatal(err)
	}
	if c.Temporal.Address != "localhost:7233" || c.Temporal.TaskQueue != "capflow" || c.Router.MinConfidence != 0.7 ||
		strings.Join(c.ToolResolutionOrder, ",") != "project_tools,active_kits" || c.StateDir != ".capflow/state" || c.File != "" {
		t.Fatalf("defaults wrong: %+v", c)
	}
}

func TestPrecedence(t *testing.T) {
	dir := project(t, "temporal: {address: file:1, namespace: filens}\nactive_kits: [core, media]\n")
	c, err := Load(Options{Project: dir})
	if err != nil {
		t.Fatal(err)
	}
	if c.Temporal.Address != "file:1" || c.Temporal.Namespace != "filens" || len(c.ActiveKits) != 2 {
		t.Fatalf("file not applied: %+v", c)
	}
	t.Setenv("TEMPORAL_ADDRESS", "std:2")
	c, _ = Load(Options{Project: dir})
	if c.Temporal.Address != "std:2" {
		t.Fatalf("TEMPORAL_ADDRESS should beat the file: %s", c.Temporal.Address)
	}
	t.Setenv("CAPFLOW_TEMPORAL_ADDRESS", "env:3")
	t.Setenv("CAPFLOW_ACTIVE_KITS", "core,x")
	c, _ = Load(Options{Project: dir})
	if c.Temporal.Address != "env:3" || strings.Join(c.ActiveKits, ",") != "core,x" {
		t.Fatalf("CAPFLOW_* should beat TEMPORAL_* and the file: %+v", c)
	}
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.String("address", "", "")
	_ = fs.Parse([]string{"--address", "flag:4"})
	c, _ = Load(Options{Project: dir, Flags: map[string]*pflag.Flag{"temporal.address": fs.Lookup("address")}})
	if c.Temporal.Address != "flag:4" {
		t.Fatalf("flag should win: %s", c.Temporal.Address)
	}
}

func TestUnknownKeyNamesLine(t *testing.T) {
	_, err := Load(Options{Project: project(t, "kits_dirs: [kits]\ntemporal:\n  adress: x\nactiv_kits: [core]\n")})
	var probs caperr.Problems
	if !errors.As(err, &probs) || len(probs) != 2 {
		t.Fatalf("want 2 problems, got %v", err)
	}
	if probs[0].Line != 3 || !strings.Contains(probs[0].Message, `did you mean "address"`) || probs[0].Code != caperr.ConfigError {
		t.Fatalf("first problem: %v", probs[0])
	}
	if probs[1].Line != 4 || !strings.Contains(probs[1].Message, `did you mean "active_kits"`) {
		t.Fatalf("second problem: %v", probs[1])
	}
}

func TestBadFiles(t *testing.T) {
	for _, src := range []string{"a: [\n", "- x\n", "router: {min_confidence: 2}\n", "tool_resolution_order: [kits]\n"} {
		_, err := Load(Options{Project: project(t, src)})
		if caperr.CodeOf(err) != caperr.ConfigError && !isProblems(err) {
			t.Errorf("%q: want CONFIG_ERROR, got %v", src, err)
		}
	}
	if _, err := Load(Options{Project: project(t, ""), File: "/nonexistent/capflow.yaml"}); caperr.CodeOf(err) != caperr.ConfigError {
		t.Errorf("missing explicit file: %v", err)
	}
}

func isProblems(err error) bool {
	var p caperr.Problems
	return errors.As(err, &p) && p[0].Code == caperr.ConfigError
}

func TestStateAndRunsDirs(t *testing.T) {
	dir := project(t, "")
	os.WriteFile(filepath.Join(dir, "afile"), []byte("x"), 0o644)
	for _, src := range []string{"state_dir: /\n", "runs_dir: /\n", "state_dir: afile\n", "runs_dir: ../../../../../../../../..\n"} {
		os.WriteFile(filepath.Join(dir, FileName), []byte(src), 0o644)
		_, err := Load(Options{Project: dir})
		if caperr.CodeOf(err) != caperr.ConfigError {
			t.Errorf("%q: want CONFIG_ERROR, got %v", src, err)
		}
	}
}

func TestHostileConfigFiles(t *testing.T) {
	dir := project(t, "")
	cfg := filepath.Join(dir, FileName)
	os.Remove(cfg)
	if err := os.Symlink("/dev/zero", cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(Options{Project: dir}); caperr.CodeOf(err) != caperr.ConfigError || !strings.Contains(err.Error(), "leads outside") {
		t.Fatalf("/dev/zero as capflow.yaml: %v", err)
	}
	os.Remove(cfg)
	if err := syscall.Mkfifo(cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(Options{Project: dir}); caperr.CodeOf(err) != caperr.ConfigError {
		t.Fatalf("FIFO as capflow.yaml: %v", err)
	}
}

// TestMCPEnvKeepsItsCase: viper lowercases the map it merges; an MCP
// server's env names reached it lowercased (the hostile audit's M7).
func TestMCPEnvKeepsItsCase(t *testing.T) {
	c, err := Load(Options{Project: project(t, "mcp_servers:\n  s:\n    command: [srv]\n    env: {EVIL_FIXED: fixed-value, MixedCase: x}\n")})
	if err != nil {
		t.Fatal(err)
	}
	env := c.MCPServers["s"].Env
	if env["EVIL_FIXED"] != "fixed-value" || env["MixedCase"] != "x" || len(env) != 2 {
		t.Fatalf("env %v", env)
	}
}

// TestProtectedFollowsTheConfiguration: the folders and files a project
// configures are what no tool may write (the hostile audit's M3, past the
// default names).
func TestProtectedFollowsTheConfiguration(t *testing.T) {
	dir := project(t, "tools_dirs: [mytools]\nkits_dirs: [mykits, /opt/kits]\nstate_dir: st/state\nruns_dir: rn\npolicy: conf/policy.yaml\nrouter: {rules: conf/router.yaml}\n")
	c, err := Load(Options{Project: dir})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(c.Protected(), " ")
	if got != "st/state rn conf/policy.yaml conf/router.yaml capflow.yaml mytools mykits" {
		t.Fatalf("protected: %s", got)
	}
}

// A capability's limits are read from the file as they are written (its
// name keeps its dots), and a broken one is named at its line.
func TestCapabilityLimits(t *testing.T) {
	cfg, err := Load(Options{Project: project(t, "limits:\n  video.download: {rate: 30/m, key: '${inputs.account}'}\n")})
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.Limits["video.download"]; l.Rate != "30/m" || l.KeyInput() != "account" {
		t.Fatalf("limits %+v", cfg.Limits)
	}
	if cfg, err := Load(Options{Project: project(t, "limits:\n  test.capped: {concurrency: 1}\n")}); err != nil || cfg.Limits["test.capped"].Concurrency != 1 {
		t.Fatalf("a concurrency alone: %v", err)
	}
	for src, want := range map[string]string{
		"limits:\n  video.download: {rate: 0/s}\n":          `capflow.yaml:2:20: limits.video.download.rate: rate "0/s" lets nothing start`,
		"limits:\n  Video: {concurrency: 1}\n":              `"Video" is not domain.action`,
		"limits:\n  video.download: {concurency: 1}\n":      `capflow.yaml:2:20: limits.video.download.concurency: unknown field "concurency" (did you mean "concurrency"?)`,
		"limits:\n  video.download: {key: '${inputs.a}'}\n": `capflow.yaml:2:3: limits.video.download: a limit needs concurrency or rate`,
	} {
		_, err := Load(Options{Project: project(t, src)})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %s", src, err, want)
		}
	}
}

// A variable of a boolean or numeric key that holds neither is refused
// naming the variable; good ones (eager_steps among them) apply.
func TestTypedVariables(t *testing.T) {
	dir := project(t, "")
	for _, c := range []struct{ name, val, want string }{
		{"CAPFLOW_TEMPORAL_EAGER_STEPS", "maybe", `temporal.eager_steps: CAPFLOW_TEMPORAL_EAGER_STEPS="maybe" is not true or false`},
		{"TEMPORAL_TLS", "sometimes", `temporal.tls.enabled: TEMPORAL_TLS="sometimes" is not true or false`},
		{"CAPFLOW_TEMPORAL_SEGMENT_EVENTS", "lots", `temporal.segment_events: CAPFLOW_TEMPORAL_SEGMENT_EVENTS="lots" is not a whole number`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(c.name, c.val)
			_, err := Load(Options{Project: dir})
			var ce *caperr.Error
			if !errors.As(err, &ce) || ce.Code != caperr.ConfigError || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v", err)
			}
		})
	}
	t.Setenv("CAPFLOW_TEMPORAL_EAGER_STEPS", "true")
	t.Setenv("CAPFLOW_TEMPORAL_SEGMENT_EVENTS", "0x100")
	c, err := Load(Options{Project: dir})
	if err != nil || !c.Temporal.EagerSteps || c.Temporal.SegmentEvents != 256 {
		t.Fatalf("%v %+v", err, c.Temporal)
	}
}

// Providers of the llm section, and the router's fallback naming one.
func TestLLMProviders(t *testing.T) {
	c, err := Load(Options{Project: project(t, `llm:
  local: {base_url: "http://127.0.0.1:8080/v1", model: qwen, price: {input_per_mtok: 0.5, output_per_mtok: 1.5}}
  MyClaude: {api: anthropic, model: claude-x, api_key_env: ANTHROPIC_KEY, timeout: 90s}
router:
  llm: {provider: MyClaude}
`)})
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.RouterLLM()
	if err != nil || l.API != "anthropic" || l.Model != "claude-x" || l.APIKeyEnv != "ANTHROPIC_KEY" || l.Timeout != "90s" ||
		c.LLM["local"].Price.OutputPerMTok != 1.5 || c.LLM["local"].BaseURL != "http://127.0.0.1:8080/v1" {
		t.Fatalf("router llm %+v (%v), providers %+v", l, err, c.LLM)
	}
	t.Setenv("CAPFLOW_ROUTER_LLM_BASE_URL", "http://env:1/v1")
	t.Setenv("CAPFLOW_ROUTER_LLM_MODEL", "env-model")
	if c, err := Load(Options{Project: project(t, "")}); err != nil || c.Router.LLM.BaseURL != "http://env:1/v1" || c.Router.LLM.Model != "env-model" {
		t.Fatalf("the router's own settings from the environment: %+v %v", c.Router.LLM, err)
	}
	for _, bad := range []struct{ yaml, want string }{
		{"llm:\n  local: {model: m}\nrouter:\n  llm: {provider: nobody}\n", `router.llm.provider: "nobody" is not a provider of the llm section (it declares local; names are matched as written)`},
		{"llm:\n  x: {api: gemini, model: m}\n", "llm.x.api"},
		{"llm:\n  x: {base_url: http://h}\n", "model"},
		{"llm:\n  x: {model: m, api_key: sk-inline}\n", "capflow.yaml:2:17: llm.x.api_key: a key is never written in capflow.yaml: put it in an environment variable and name that variable in api_key_env"},
	} {
		_, err := Load(Options{Project: project(t, bad.yaml)})
		if (caperr.CodeOf(err) != caperr.ConfigError && !isProblems(err)) || err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want CONFIG_ERROR naming %s", bad.yaml, err, bad.want)
		}
	}
}
