package deploy

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

type composeFile struct {
	Services map[string]struct {
		Image string `yaml:"image"`
		Build *struct {
			Context string            `yaml:"context"`
			Args    map[string]string `yaml:"args"`
		} `yaml:"build"`
		Environment map[string]string `yaml:"environment"`
		DependsOn   map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
		Healthcheck *struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
		Volumes    mounts   `yaml:"volumes"`
		Ports      mounts   `yaml:"ports"`
		Profiles   []string `yaml:"profiles"`
		Entrypoint []string `yaml:"entrypoint"`
		Command    []string `yaml:"command"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

// mounts are volumes or ports as "from:to", whichever syntax the compose
// CLI prints them in (short strings, or {source|published, target} maps).
type mounts []string

func (m *mounts) UnmarshalYAML(b []byte) error {
	var raw []any
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return err
	}
	for _, r := range raw {
		switch v := r.(type) {
		case string:
			*m = append(*m, v)
		case map[string]any:
			from := v["source"]
			if from == nil {
				from = v["published"]
			}
			*m = append(*m, fmt.Sprintf("%v:%v", from, v["target"]))
		}
	}
	return nil
}

// compose validates docker-compose.yml with the compose CLI (`config`
// resolves anchors, merges and variables exactly as `up` would) and
// returns the resolved file.
func compose(t *testing.T, env ...string) composeFile {
	t.Helper()
	cmd := exec.Command("docker-compose", "-f", "../docker-compose.yml", "config")
	if _, err := exec.LookPath("docker-compose"); err != nil {
		// Compose v2, the docker CLI's plugin, validates the same way.
		if exec.Command("docker", "compose", "version").Run() != nil {
			t.Fatalf("neither docker-compose nor docker compose is installed (make test installs Debian's docker-compose): %v", err)
		}
		cmd = exec.Command("docker", "compose", "-f", "../docker-compose.yml", "config")
	}
	cmd.Env = append(cleanEnv(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("docker-compose config: %v\n%s", err, errb.String())
	}
	var f composeFile
	if err := yaml.Unmarshal(out.Bytes(), &f); err != nil {
		t.Fatalf("resolved compose file: %v\n%s", err, out.String())
	}
	return f
}

// cleanEnv drops the CAPFLOW_ and TEMPORAL_ variables of whoever runs the
// tests: the defaults are what is checked.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CAPFLOW_") && !strings.HasPrefix(kv, "TEMPORAL_") && !strings.HasPrefix(kv, "COMPOSE_") {
			out = append(out, kv)
		}
	}
	return out
}

var pinned = regexp.MustCompile(`^[a-z0-9./-]+:v?[0-9][0-9.]*$`)

func TestComposeStack(t *testing.T) {
	f := compose(t)
	for _, name := range []string{"postgresql", "temporal-schema", "temporal", "temporal-setup", "temporal-ui", "capflow-worker", "capflow", "codec-server", "object-store"} {
		if _, ok := f.Services[name]; !ok {
			t.Fatalf("no service %s", name)
		}
	}
	for name, s := range f.Services {
		if s.Build == nil && !pinned.MatchString(s.Image) {
			t.Errorf("%s: image %q is not pinned to a version", name, s.Image)
		}
	}
	// make cluster builds the server the compose stack runs.
	mk, _ := os.ReadFile("../Makefile")
	if tag := strings.TrimPrefix(f.Services["temporal"].Image, "temporalio/server:"); !strings.Contains(string(mk), "TEMPORAL_SERVER_VERSION ?= v"+tag+"\n") {
		t.Errorf("the Makefile's TEMPORAL_SERVER_VERSION is not the compose stack's server, %s", tag)
	}
	for _, name := range []string{"postgresql", "temporal", "temporal-ui", "capflow-worker"} {
		hc := f.Services[name].Healthcheck
		if hc == nil || len(hc.Test) == 0 || hc.Test[0] == "NONE" {
			t.Errorf("%s has no health check", name)
		}
	}
	deps := []struct{ service, on, condition string }{
		{"temporal-schema", "postgresql", "service_healthy"},
		{"temporal", "temporal-schema", "service_completed_successfully"},
		{"temporal-setup", "temporal", "service_healthy"},
		{"temporal-ui", "temporal", "service_healthy"},
		{"capflow-worker", "temporal-setup", "service_completed_successfully"},
	}
	for _, d := range deps {
		if got := f.Services[d.service].DependsOn[d.on].Condition; got != d.condition {
			t.Errorf("%s depends on %s %q, want %q", d.service, d.on, got, d.condition)
		}
	}
	for _, v := range []string{"temporal-db", "capflow-runs"} {
		if _, ok := f.Volumes[v]; !ok {
			t.Errorf("no named volume %s", v)
		}
	}
	if !hasPrefix(f.Services["postgresql"].Volumes, "temporal-db:/var/lib/postgresql/data") {
		t.Errorf("postgresql data is not on its volume: %v", f.Services["postgresql"].Volumes)
	}

	w := f.Services["capflow-worker"]
	repo, _ := filepath.Abs("..")
	if w.Build == nil || w.Build.Context != repo {
		t.Fatalf("the worker is not built from the repository: %+v", w.Build)
	}
	if w.Environment["CAPFLOW_TEMPORAL_ADDRESS"] != "temporal:7233" || w.Environment["CAPFLOW_METRICS_ADDR"] != "0.0.0.0:9090" || w.Environment["CAPFLOW_TEMPORAL_HOST_WAIT"] != "2m" {
		t.Errorf("worker environment: %v", w.Environment)
	}
	if !strings.Contains(strings.Join(w.Healthcheck.Test, " "), "127.0.0.1:9090/healthz") {
		t.Errorf("the worker's health check does not ask its /healthz: %v", w.Healthcheck.Test)
	}
	if !hasPrefix(w.Volumes, repo+":/project") || !hasPrefix(w.Volumes, "capflow-runs:/project/.capflow") {
		t.Errorf("worker volumes: %v", w.Volumes)
	}
	if ui := f.Services["temporal-ui"]; !hasPrefix(ui.Ports, "8233:8080") && !strings.Contains(strings.Join(ui.Ports, " "), "8233") {
		t.Errorf("the Web UI is not on 8233 (where capflow's run links point): %v", ui.Ports)
	}
	if f.Services["capflow"].Entrypoint[0] != "capflow" || f.Services["capflow"].Profiles[0] != "cli" {
		t.Errorf("cli service: %+v", f.Services["capflow"])
	}

	// Mounted files exist: the scripts the admin-tools containers run and
	// the dynamic config the server reads.
	for _, s := range []string{"temporal-schema", "temporal-setup"} {
		script := strings.TrimPrefix(f.Services[s].Command[0], "/scripts/")
		if _, err := os.Stat(filepath.Join("compose", script)); err != nil {
			t.Errorf("%s runs %s: %v", s, script, err)
		}
	}
	dc := filepath.Base(f.Services["temporal"].Environment["DYNAMIC_CONFIG_FILE_PATH"])
	raw, err := os.ReadFile(filepath.Join("temporal", dc))
	if err != nil {
		t.Fatalf("dynamic config: %v", err)
	}
	var cfg map[string][]struct {
		Value any `yaml:"value"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil || len(cfg["frontend.enableUpdateWorkflowExecution"]) != 1 {
		t.Fatalf("dynamic config %s: %v %v", dc, err, cfg)
	}
	// The workers send steps' first attempts to be started eagerly only
	// where the server does (docs/operations.md#eager-steps).
	if eager := cfg["system.enableActivityEagerExecution"]; len(eager) != 1 || eager[0].Value != true || w.Environment["CAPFLOW_TEMPORAL_EAGER_STEPS"] != "true" {
		t.Errorf("eager steps: the server's %v, the workers' %q", eager, w.Environment["CAPFLOW_TEMPORAL_EAGER_STEPS"])
	}

	// Variables reach the containers.
	f = compose(t, "CAPFLOW_PAYLOAD_KEY=k", "CAPFLOW_CODEC_ENDPOINT=http://localhost:8089", "CAPFLOW_PROJECT=/srv/project")
	if f.Services["capflow-worker"].Environment["CAPFLOW_PAYLOAD_KEY"] != "k" || f.Services["temporal-ui"].Environment["TEMPORAL_CODEC_ENDPOINT"] != "http://localhost:8089" ||
		!hasPrefix(f.Services["capflow-worker"].Volumes, "/srv/project:/project") {
		t.Errorf("settings do not reach the containers: %+v", f.Services["capflow-worker"])
	}
}

func hasPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// TestDockerfile checks what can be checked without an engine: pinned
// bases, the Go version of go.mod, sources that exist, the binaries it
// builds are the ones it starts, the health check's port is the metrics
// port.
func TestDockerfile(t *testing.T) {
	raw, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	args := map[string]string{}
	var froms, copies []string
	var entry, health, metrics string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch word, rest, _ := strings.Cut(line, " "); word {
		case "ARG":
			if k, v, ok := strings.Cut(rest, "="); ok {
				args[k] = v
			}
		case "FROM":
			froms = append(froms, strings.Fields(rest)[0])
		case "COPY":
			if !strings.HasPrefix(rest, "--from") {
				fields := strings.Fields(rest)
				copies = append(copies, fields[:len(fields)-1]...)
			}
		case "ENTRYPOINT":
			entry = rest
		case "HEALTHCHECK":
			health = rest
		case "ENV":
			if strings.HasPrefix(rest, "CAPFLOW_METRICS_ADDR=") {
				metrics = strings.TrimPrefix(rest, "CAPFLOW_METRICS_ADDR=")
			}
		}
	}
	gomod, _ := os.ReadFile("../go.mod")
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(gomod)
	if goVersion == nil || args["GO_VERSION"] != string(goVersion[1]) {
		t.Errorf("Dockerfile GO_VERSION %q, go.mod says %s", args["GO_VERSION"], goVersion)
	}
	expand := regexp.MustCompile(`\$\{(\w+)\}`)
	for _, f := range froms {
		img := expand.ReplaceAllStringFunc(f, func(v string) string { return args[expand.FindStringSubmatch(v)[1]] })
		if !strings.Contains(img, ":") || strings.HasSuffix(img, ":latest") || strings.Contains(img, "${") {
			t.Errorf("base image %s (%s) is not pinned", f, img)
		}
	}
	for _, c := range copies {
		if c == "." {
			continue
		}
		if _, err := os.Stat(filepath.Join("..", c)); err != nil {
			t.Errorf("COPY %s: %v", c, err)
		}
	}
	for _, bin := range []string{"./starter", "./worker"} {
		if !bytes.Contains(raw, []byte(bin)) {
			t.Errorf("the image does not build %s", bin)
		}
	}
	// The sandbox's zygote is C: the binaries are built with cgo, against
	// the glibc of the release the image runs.
	if bytes.Contains(raw, []byte("CGO_ENABLED=0")) || !bytes.Contains(raw, []byte("CGO_ENABLED=1 go build")) {
		t.Error("the image's binaries are not built with cgo: no zygote (docs/sandbox.md)")
	}
	for _, f := range froms {
		if !strings.Contains(f, "${DEBIAN_RELEASE}") {
			t.Errorf("base image %s is not of the same Debian release as the others", f)
		}
	}
	if !strings.Contains(entry, `"capflow-worker"`) {
		t.Errorf("ENTRYPOINT %s does not start the worker", entry)
	}
	_, port, _ := strings.Cut(metrics, ":")
	if port == "" || !strings.Contains(health, "127.0.0.1:"+port+"/healthz") {
		t.Errorf("HEALTHCHECK %q does not ask the metrics port %q", health, port)
	}
	ignore, err := os.ReadFile("../.dockerignore")
	if err != nil || !bytes.Contains(ignore, []byte(".capflow")) || !bytes.Contains(ignore, []byte(".git")) {
		t.Errorf(".dockerignore must keep run folders and .git out of the build context: %v", err)
	}
}

// TestSetupScripts runs the compose stack's setup scripts against fake
// tools that record their calls: first start, and a start on an existing
// stack.
func TestSetupScripts(t *testing.T) {
	for _, s := range []string{"compose/setup-postgres.sh", "compose/setup-namespace.sh"} {
		if out, err := exec.Command("sh", "-n", s).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", s, err, out)
		}
		if st, err := os.Stat(s); err != nil || st.Mode()&0o111 == 0 {
			t.Errorf("%s is not executable", s)
		}
	}
	for _, tc := range []struct {
		name   string
		exists bool
		want   []string
		not    []string
	}{
		{"first start", false, []string{
			"operator namespace create --namespace prod --retention 720h",
			"operator search-attribute create --namespace prod --name CapflowPlan --type Keyword",
			"operator search-attribute create --namespace prod --name CapflowStatus --type Keyword",
		}, nil},
		{"restart", true, nil, []string{"namespace create", "search-attribute create"}},
	} {
		t.Run("namespace "+tc.name, func(t *testing.T) {
			dir := t.TempDir()
			log := filepath.Join(dir, "calls")
			// A stand-in server that keeps what is created, and answers
			// "unavailable" to its first two questions (a fresh server).
			fake := `#!/bin/sh
echo "$*" >> ` + log + `
d=` + dir + `
n=$(cat $d/asked 2>/dev/null || echo 0); echo $((n+1)) > $d/asked
[ $n -lt 2 ] && { echo "Unavailable: connection refused" >&2; exit 1; }
case "$*" in
  "operator namespace describe"*) [ -e $d/ns ] || { echo "Error: Namespace prod is not found." >&2; exit 1; } ;;
  "operator namespace create"*) touch $d/ns ;;
  "operator search-attribute list"*) ls $d | grep Capflow; true ;;
  "operator search-attribute create"*) touch $d/$(echo "$*" | sed 's/.*--name \([A-Za-z]*\).*/\1/') ;;
esac
`
			if tc.exists {
				for _, f := range []string{"ns", "CapflowPlan", "CapflowStatus"} {
					_ = os.WriteFile(filepath.Join(dir, f), nil, 0o644)
				}
			}
			if err := os.WriteFile(filepath.Join(dir, "temporal"), []byte(fake), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("sh", "compose/setup-namespace.sh")
			cmd.Env = append(cleanEnv(), "PATH="+dir+":"+os.Getenv("PATH"), "NAMESPACE=prod", "SETUP_WAIT=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			calls, _ := os.ReadFile(log)
			for _, w := range tc.want {
				if !strings.Contains(string(calls), w) {
					t.Errorf("no call %q in\n%s", w, calls)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(string(calls), n) {
					t.Errorf("unexpected call %q in\n%s", n, calls)
				}
			}
		})
	}
	t.Run("schema", func(t *testing.T) {
		dir := t.TempDir()
		log := filepath.Join(dir, "calls")
		fake := "#!/bin/sh\necho \"$*\" >> " + log + "\ncase \"$*\" in *create*) exit 1;; esac\n" // databases exist already
		if err := os.WriteFile(filepath.Join(dir, "temporal-sql-tool"), []byte(fake), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("sh", "compose/setup-postgres.sh")
		cmd.Env = append(cleanEnv(), "PATH="+dir+":"+os.Getenv("PATH"), "DB=postgres12", "POSTGRES_SEEDS=postgresql", "POSTGRES_USER=temporal", "DB_PORT=5432")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("an existing database must not stop the setup: %v\n%s", err, out)
		}
		calls, _ := os.ReadFile(log)
		for _, w := range []string{
			"--plugin postgres12 --ep postgresql -u temporal -p 5432 --db temporal update-schema -d /etc/temporal/schema/postgresql/v12/temporal/versioned",
			"--db temporal_visibility update-schema -d /etc/temporal/schema/postgresql/v12/visibility/versioned",
		} {
			if !strings.Contains(string(calls), w) {
				t.Errorf("no call %q in\n%s", w, calls)
			}
		}
	})
}
