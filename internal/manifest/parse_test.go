package manifest

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

const good = `name: file-checksum
version: 1.2.0
description: SHA-256 of a file
capabilities: [file.checksum]
input_schema: {type: object, required: [path], properties: {path: {type: string}}}
output_schema: {type: object, required: [sha256], properties: {sha256: {type: string}}}
entrypoint:
  type: command
  command: [./run.sh]
  env: {LC_ALL: C}
dependencies:
  - {kind: binary, name: sha256sum}
  - {kind: service, name: drive, url: http://127.0.0.1:9000/health}
secrets: [DRIVE_TOKEN]
idempotent: true
priority: 10
timeouts: {start_to_close: 5m, heartbeat: 30s}
retry: {max_attempts: 3, initial_interval: 1s, backoff: 2.0, max_interval: 1m}
`

func TestParseGood(t *testing.T) {
	m, probs := Parse("tools/x/tool.yaml", "tools/x", []byte(good))
	if len(probs) > 0 {
		t.Fatalf("unexpected problems:\n%v", probs)
	}
	if m.Name != "file-checksum" || m.Stability != "stable" || m.Entrypoint.Result != ResultEnvelope {
		t.Fatalf("defaults not applied: %+v", m)
	}
	if m.Timeouts.StartToClose.D().Minutes() != 5 || m.Retry.MaxAttempts != 3 || m.Retry.Backoff != 2.0 {
		t.Fatalf("timeouts/retry: %+v %+v", m.Timeouts, m.Retry)
	}
	if !strings.HasPrefix(m.Digest, "sha256:") || m.Line != 1 {
		t.Fatalf("digest/line: %s %d", m.Digest, m.Line)
	}
}

func TestLocal(t *testing.T) {
	for _, tc := range []struct {
		execution, queue string
		idempotent       bool
		timeout          time.Duration
		want             bool
	}{
		{"auto", "", true, time.Second, true},
		{"auto", "", true, 2 * time.Second, true},
		// Longer holds the run's task, and its status, too long (issue 54).
		{"auto", "", true, 3 * time.Second, false},
		{"auto", "", true, 30 * time.Second, false},
		{"auto", "", false, time.Second, false},
		{"", "", true, time.Second, true}, // cached manifests from before the field
		{"activity", "", true, time.Second, false},
		{"local", "", true, 10 * time.Minute, true},
		{"auto", "gpu", true, time.Second, false},
	} {
		m := &Manifest{Execution: tc.execution, TaskQueue: tc.queue, Idempotent: tc.idempotent}
		if got := m.Local(tc.timeout); got != tc.want {
			t.Errorf("%+v: Local(%s) = %v, want %v", tc, tc.timeout, got, tc.want)
		}
	}
}

func TestInline(t *testing.T) {
	for _, tc := range []struct {
		execution, entry, queue string
		want                    bool
	}{
		{"inline", EntryBuiltin, "", true},
		{"inline", EntryCommand, "", true},
		{"inline", EntryHTTP, "", false},
		{"inline", EntryMCP, "", false},
		{"inline", EntryCommand, "gpu", false},
		{"local", EntryBuiltin, "", false},
	} {
		m := &Manifest{Execution: tc.execution, TaskQueue: tc.queue, Idempotent: true, Entrypoint: Entrypoint{Type: tc.entry}}
		if got := m.Inline(); got != tc.want {
			t.Errorf("%+v: Inline() = %v, want %v", tc, got, tc.want)
		}
	}
}

func TestLimits(t *testing.T) {
	src := strings.Replace(good, "priority: 10\n", "priority: 10\nlimits: {concurrency: 2, rate: 30/m, key: '${inputs.path}'}\n", 1)
	m, probs := Parse("tools/x/tool.yaml", "tools/x", []byte(src))
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	l := m.Limits
	if l == nil || l.Concurrency != 2 || l.Interval() != 2*time.Second || l.KeyInput() != "path" || l.Describe() != "concurrency 2, rate 30/m per path" {
		t.Fatalf("limits %+v: interval %s, key %q, %q", l, l.Interval(), l.KeyInput(), l.Describe())
	}
	if (Limits{Rate: "5/s"}).Interval() != 200*time.Millisecond {
		t.Fatal("5/s is not one start each 200ms")
	}
}

func TestParseProblems(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // "line:field: fragment"
	}{
		{"bad yaml", "name: [x\n", []string{"1:: invalid YAML"}},
		{"not a mapping", "- a\n- b\n", []string{"1:: must be a YAML mapping"}},
		{"missing fields", "name: x\n", []string{
			`1:version: missing required field "version"`, `1:description: missing required field "description"`,
			`1:capabilities: missing required field "capabilities"`, `1:entrypoint: missing required field "entrypoint"`}},
		{"wrong types and names", "name: Bad_Name\nversion: one\ndescription: d\ncapabilities: [Video.Convert, x.y, x.y]\nentrypoint: {type: builtin, name: x}\npriority: high\nidempotent: 'yes'\n", []string{
			`1:name: must be kebab-case`, `2:version: is not semver`, `4:capabilities[0]: "Video.Convert" is not domain.action`,
			`4:capabilities[2]: listed twice`, `6:priority: must be integer, not string`, `7:idempotent: must be boolean`}},
		{"unknown fields", "name: x\nversion: 1.0.0\ndescription: d\ncapabilites: [a.b]\ncapabilities: [a.b]\nentrypoint: {type: builtin, name: x, comand: [a]}\n", []string{
			`4:capabilites: unknown field "capabilites" (did you mean "capabilities"?)`, `6:entrypoint.comand: unknown field "comand" (did you mean "command"?)`}},
		{"invalid json schema", "name: x\nversion: 1.0.0\ndescription: d\ncapabilities: [a.b]\nentrypoint: {type: builtin, name: x}\ninput_schema:\n  type: objekt\n  properties:\n    n: {minLength: -1}\n", []string{
			`7:input_schema.type: not a valid JSON Schema 2020-12`, `9:input_schema.properties.n.minLength: not a valid JSON Schema 2020-12`}},
		{"entrypoint mismatch", "name: x\nversion: 1.0.0\ndescription: d\ncapabilities: [a.b]\nentrypoint:\n  type: command\n  url: http://x\n  command: ['sh -c run']\n", []string{
			`7:entrypoint.url: "url" belongs to entrypoint type http`, `8:entrypoint.command[0]: never runs through a shell`}},
		{"execution", "name: x\nversion: 1.0.0\ndescription: d\ncapabilities: [a.b]\nentrypoint: {type: builtin, name: x}\nexecution: fast\n", []string{
			`6:execution: must be one of auto, activity, local`}},
		{"local needs idempotent, not a queue", "name: x\nversion: 1.0.0\ndescription: d\ncapabilities: [a.b]\nentrypoint: {type: builtin, name: x}\ntask_queue: gpu\nexecution: local\n", []string{
			`7:execution: local needs idempotent: true`, `7:execution: cannot go with task_queue "gpu"`}},
		{"inline is for builtins and commands", "name: x\nversion: 1.0.0\ndescription: d\ncapabilities: [a.b]\nentrypoint: {type: http, url: 'http://x'}\nidempotent: true\nexecution: inline\n", []string{
			`7:execution: inline is for builtins and commands`}},
		{"bad durations and deps", "name: x\nversion: 1.0.0\ndescription: d\ncapabilities: [a.b]\nentrypoint: {type: builtin, name: x}\ntimeouts: {start_to_close: 5 minutes}\ndependencies:\n  - {kind: service, name: s}\n  - {kind: docker, name: d}\n", []string{
			`6:timeouts.start_to_close: "5 minutes" is not a duration like 30s, 5m or 1h30m`, `8:dependencies[0]: a service dependency needs a url`, `9:dependencies[1].kind: must be one of binary, env, service`}},
		{"sandbox", "name: x\nversion: 1.0.0\ndescription: d\ncapabilities: [a.b]\nentrypoint: {type: command, command: [./r]}\nsandbox:\n  memory: 2 gigs\n  write: [step, /etc, ../up, .]\n  pids: 0\n", []string{
			`7:sandbox.memory: is not a size like 512MiB or 2GiB`, `8:sandbox.write[1]: write "/etc": only "step" or a path inside the project`,
			`8:sandbox.write[2]: write "../up": only "step"`, `8:sandbox.write[3]: write "." would make the whole project writable`, `9:sandbox.pids: `}},
		{"limits", "name: x\nversion: 1.0.0\ndescription: d\ncapabilities: [a.b]\nentrypoint: {type: builtin, name: x}\ninput_schema: {type: object, properties: {account: {type: string}}}\nlimits:\n  concurrency: 0\n  rate: fast\n  key: ${inputs.acount}\n  burst: 2\n", []string{
			`8:limits.concurrency: `, `9:limits.rate: "fast" is not a rate like 5/s or 30/m`,
			`10:limits.key: key "${inputs.acount}" names no input of this tool (its input_schema has no property "acount") (did you mean "account"?)`, `11:limits.burst: unknown field "burst"`}},
		{"limits need a regular activity", "name: x\nversion: 1.0.0\ndescription: d\ncapabilities: [a.b]\nentrypoint: {type: builtin, name: x}\nidempotent: true\nexecution: local\nlimits: {concurrency: 1}\n", []string{
			`7:execution: local cannot go with limits`}},
		{"limits that let nothing start", "name: x\nversion: 1.0.0\ndescription: d\ncapabilities: [a.b]\nentrypoint: {type: builtin, name: x}\nlimits: {rate: 0/s, key: '${account}'}\n", []string{
			`6:limits.rate: rate "0/s" lets nothing start`, `6:limits.key: is not ${inputs.FIELD}`}},
		// Hostile findings at 6003afe, 16-18: rates past what a limit keeps,
		// a key alone.
		{"rates out of bounds, a key alone", "name: x\nversion: 1.0.0\ndescription: d\ncapabilities: [a.b]\nentrypoint: {type: builtin, name: x}\ninput_schema: {type: object, properties: {x: {type: string}}}\nlimits: {rate: 0.00000000001/s}\n", []string{
			`7:limits.rate: rate "0.00000000001/s" is slower than one start a day`}},
		{"too fast", "name: x\nversion: 1.0.0\ndescription: d\ncapabilities: [a.b]\nentrypoint: {type: builtin, name: x}\nlimits: {rate: 2000000000/s}\n", []string{
			`6:limits.rate: rate "2000000000/s" is faster than a million starts a second`}},
		{"a key alone", "name: x\nversion: 1.0.0\ndescription: d\ncapabilities: [a.b]\nentrypoint: {type: builtin, name: x}\ninput_schema: {type: object, properties: {x: {type: string}}}\nlimits: {key: '${inputs.x}'}\n", []string{
			`7:limits: a limit needs concurrency or rate`}},
		// The hostile audit's M3: a tool that may write the engine's state
		// poisoned another run's cache entry.
		{"sandbox write of what the engine trusts", "name: x\nversion: 1.0.0\ndescription: d\ncapabilities: [a.b]\nentrypoint: {type: command, command: [./r]}\nsandbox:\n  write:\n    - .capflow\n    - .capflow/state/artifacts\n    - tools\n    - kits/core/x\n    - capflow.yaml\n    - policy.yaml\n    - .git/hooks\n    - ./tools/../.capflow\n", []string{
			`8:sandbox.write[0]: write ".capflow" would let the tool change .capflow`, `9:sandbox.write[1]: write ".capflow/state/artifacts" would let the tool change .capflow`,
			`10:sandbox.write[2]: write "tools" would let the tool change tools`, `11:sandbox.write[3]: write "kits/core/x" would let the tool change kits`,
			`12:sandbox.write[4]: write "capflow.yaml" would`, `13:sandbox.write[5]: write "policy.yaml" would`, `14:sandbox.write[6]: write ".git/hooks" would`,
			`15:sandbox.write[7]: write "./tools/../.capflow" would let the tool change .capflow`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, probs := Parse("bad/tool.yaml", "bad", []byte(tt.src))
			if m != nil {
				t.Fatal("broken manifest accepted")
			}
			var got []string
			for _, p := range probs {
				if p.File != "bad/tool.yaml" {
					t.Errorf("problem without file: %v", p)
				}
				got = append(got, strconv.Itoa(p.Line)+":"+p.Field+": "+p.Message)
			}
			all := strings.Join(got, "\n")
			for _, w := range tt.want {
				parts := strings.SplitN(w, ": ", 2)
				prefix := parts[0] + ": "
				found := false
				for _, g := range got {
					if strings.HasPrefix(g, prefix) && strings.Contains(g, parts[1]) {
						found = true
					}
				}
				if !found {
					t.Errorf("want problem %q, got:\n%s", w, all)
				}
			}
		})
	}
}

func TestVersions(t *testing.T) {
	for v, ok := range map[string]bool{"1.2.0": true, "v1.2.0": true, "1.2": false, "1.2.0-rc.1": true, "x": false} {
		if ValidVersion(v) != ok {
			t.Errorf("ValidVersion(%q) != %v", v, ok)
		}
	}
	if CompareVersions("1.10.0", "1.9.0") <= 0 {
		t.Error("semver compare")
	}
	if !MatchesVersionPrefix("1.2.3", "1") || !MatchesVersionPrefix("1.2.3", "1.2") || MatchesVersionPrefix("11.0.0", "1") {
		t.Error("version prefix")
	}
}

func TestParseKit(t *testing.T) {
	k, probs := ParseKit("k/kit.yaml", []byte("id: media\nversion: 1.0.0\ndescription: media tools\n"))
	if len(probs) > 0 || k.ID != "media" {
		t.Fatalf("%v %v", k, probs)
	}
	_, probs = ParseKit("k/kit.yaml", []byte("id: Media\nversion: 1\n"))
	if len(probs) < 3 {
		t.Fatalf("want id, version and description problems, got %v", probs)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte("name: x\nentrypoint: {type: command, command: []}\n"))
	f.Add([]byte("input_schema: {$ref: '#/x'}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, probs := Parse("f/tool.yaml", "f", b)
		if (m == nil) == (len(probs) == 0) {
			t.Fatalf("exactly one of manifest and problems must be set: %v %v", m, probs)
		}
		for _, p := range probs {
			if p.File != "f/tool.yaml" || p.Message == "" {
				t.Fatalf("problem lacks file or message: %#v", p)
			}
		}
	})
}
