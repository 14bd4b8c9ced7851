package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/capflow/capflow/client"
	"github.com/hashicorp/go-hclog"
)

func TestHealthz(t *testing.T) {
	for _, tc := range []struct {
		name   string
		checks map[string]Check
		code   int
		status string
		detail map[string]string
	}{
		{"all well", map[string]Check{"temporal": ok, "registry": ok}, 200, "ok", map[string]string{"temporal": "ok", "registry": "ok"}},
		{"server gone", map[string]Check{"temporal": fail("connection refused"), "registry": ok}, 503, "unhealthy",
			map[string]string{"temporal": "connection refused", "registry": "ok"}},
		{"slow check times out", map[string]Check{"temporal": func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }}, 503, "unhealthy",
			map[string]string{"temporal": "context deadline exceeded"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Start("127.0.0.1:0", tc.checks, hclog.NewNullLogger())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			resp, err := http.Get("http://" + s.Addr + "/healthz")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body HealthBody
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.code || body.Status != tc.status || len(body.Checks) != len(tc.detail) {
				t.Fatalf("got %d %+v", resp.StatusCode, body)
			}
			for k, v := range tc.detail {
				if body.Checks[k] != v {
					t.Fatalf("check %s = %q, want %q", k, body.Checks[k], v)
				}
			}
		})
	}
}

func TestMetricsKeepLabelValuesReadable(t *testing.T) {
	s, err := Start("127.0.0.1:0", nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Handler.WithTags(map[string]string{"capability": "video.convert", "status": "partial-complete"}).Counter("capflow_steps_ended").Inc(3)
	s.closer.Close() // flushes the scope to the reporter
	resp, err := http.Get("http://" + s.Addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if want := `capflow_steps_ended{capability="video.convert",status="partial-complete"} 3`; !strings.Contains(string(b), want) {
		t.Fatalf("no %s in\n%s", want, b)
	}
	if !strings.Contains(string(b), "go_goroutines") {
		t.Fatal("no Go runtime metrics")
	}
}

func ok(context.Context) error { return nil }

func fail(msg string) Check { return func(context.Context) error { return errors.New(msg) } }

// A plan's step reads nothing of the worker's metrics or health.
func TestRefusesAPlan(t *testing.T) {
	s, err := Start("127.0.0.1:0", map[string]Check{"temporal": ok}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, path := range []string{"/metrics", "/healthz"} {
		req, _ := http.NewRequest("GET", "http://"+s.Addr+path, nil)
		req.Header.Set(client.PlanStepHeader, "run/step")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}
}
