package step

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/capflow/capflow/internal/artifacts"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/project"
	"github.com/capflow/capflow/internal/toolrun"
	"github.com/capflow/capflow/internal/wfapi"
)

// cancelling is a tool that succeeds with large data after its caller's
// context ended (a heartbeat that could not reach the server).
type cancelling struct{ cancel context.CancelFunc }

func (c cancelling) Run(ctx context.Context, req toolrun.Request) envelope.Envelope {
	c.cancel()
	return envelope.NewBuilder(req.Manifest.Name).Succeed("ok", map[string]any{"text": strings.Repeat("x", MaxDataInHistory+1)})
}

// An attempt whose caller's context ends while its tool runs (an outage
// the activity rides out) keeps its result: its data goes to the shared
// store under the context Bind gave, from the tool's start to the end.
func TestAttemptOutlivesItsCallersContext(t *testing.T) {
	root := t.TempDir()
	cfg, err := config.Load(config.Options{Project: root})
	if err != nil {
		t.Fatal(err)
	}
	store, err := artifacts.Open(context.Background(), artifacts.Options{URL: "file://" + filepath.Join(t.TempDir(), "store"), StateDir: filepath.Join(root, ".capflow")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Executor{Project: project.New(cfg, nil, nil), Logger: hclog.NewNullLogger(), Artifacts: store, Tool: cancelling{cancel}}
	reg, err := e.Registry()
	if err != nil {
		t.Fatal(err)
	}
	m := reg.Tool("text-render", "")
	if m == nil {
		t.Fatal("no text-render in the core kit")
	}
	in := wfapi.RunToolInput{WorkflowID: "r", RunDir: e.RunDir("r"), Step: wfapi.StepCall{ID: "s", Tool: m.Name, Version: m.Version, Digest: m.Digest, Idempotent: true, With: map[string]any{}}}
	at := Attempt{Number: 1, Max: 1, Bind: func(ctx context.Context) (context.Context, func()) { return context.WithoutCancel(ctx), func() {} }}
	res, err := e.Run(ctx, in, at)
	if err != nil || res.DataFile == "" {
		t.Fatalf("the attempt after its caller's context ended: %v %+v", err, res)
	}
}
