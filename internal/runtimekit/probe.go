package runtimekit

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/egress"
)

// prober checks one server's readiness, keeping the last 20 distinct
// observations as evidence.
type prober struct {
	r        Record
	rules    *egress.Rules
	client   *http.Client
	logs     *logWatch
	evidence []string
}

func newProber(r Record, rules *egress.Rules) (*prober, error) {
	p := &prober{r: r, rules: rules, evidence: []string{}}
	switch r.Readiness.Type {
	case "http":
		p.client = &http.Client{Timeout: 2 * time.Second, CheckRedirect: sameHost, Transport: rules.Transport()}
	case "tcp":
	case "log":
		re, err := regexp.Compile(r.Readiness.Target)
		if err != nil {
			return nil, caperr.New(caperr.InvalidInput, "readiness.target %q is not a regular expression: %v", r.Readiness.Target, err)
		}
		p.logs = &logWatch{path: r.LogPath, re: re}
	default:
		return nil, caperr.New(caperr.InvalidInput, "readiness.type %q: http, tcp or log", r.Readiness.Type)
	}
	return p, nil
}

// sameHost follows redirects only within the probed host: another host's
// answer says nothing of this server's readiness.
func sameHost(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return fmt.Errorf("stopped after 10 redirects")
	}
	if req.URL.Host != via[0].URL.Host {
		return http.ErrUseLastResponse
	}
	return nil
}

func (p *prober) note(s string) {
	if len(p.evidence) == 0 || p.evidence[len(p.evidence)-1] != s {
		p.evidence = append(p.evidence, s)
	}
	if len(p.evidence) > 20 {
		p.evidence = p.evidence[len(p.evidence)-20:]
	}
}

func (p *prober) last() string { return p.evidence[len(p.evidence)-1] }

// check looks once; an error ends the probe.
func (p *prober) check() (bool, error) {
	rd := p.r.Readiness
	switch rd.Type {
	case "http":
		resp, err := p.client.Get(rd.Target)
		if err != nil {
			p.note("GET " + rd.Target + ": " + err.Error())
			return false, nil
		}
		resp.Body.Close()
		final := resp.Request.URL.String()
		switch {
		case resp.StatusCode >= 300 && resp.StatusCode < 400 && resp.Header.Get("Location") != "":
			p.note(fmt.Sprintf("GET %s → %d (redirect to %s not followed: another host)", final, resp.StatusCode, resp.Header.Get("Location")))
		default:
			p.note(fmt.Sprintf("GET %s → %d", final, resp.StatusCode))
		}
		return resp.StatusCode < 500, nil
	case "tcp":
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := p.rules.Dial(ctx, "tcp", rd.Target)
		cancel()
		if err != nil {
			p.note("connect " + rd.Target + ": " + err.Error())
			return false, nil
		}
		c.Close()
		p.note("connect " + rd.Target + ": ok")
		return true, nil
	}
	line, matched, err := p.logs.look()
	switch {
	case err != nil:
		p.note(fmt.Sprintf("log %s: %v %q", p.r.LogPath, err, rd.Target))
		return false, caperr.New(caperr.ReadinessTimeout, "%s was not ready: %s", p.r.Name, p.last())
	case matched:
		p.note(fmt.Sprintf("log %s matched %q", p.r.LogPath, line))
	default:
		p.note(fmt.Sprintf("log %s: no line matches %q yet", p.r.LogPath, rd.Target))
	}
	return matched, nil
}

// probe checks a server every 250 ms until it is ready, exits, or the
// readiness timeout passes.
func probe(ctx context.Context, r Record, exited <-chan error, rules *egress.Rules) (map[string]any, error) {
	timeout, err := duration("readiness.timeout", r.Readiness.Timeout, 30*time.Second)
	if err != nil {
		return nil, err
	}
	p, err := newProber(r, rules)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	for {
		ok, err := p.check()
		data := map[string]any{"ready": ok, "checked_at": now(), "probe_evidence": p.evidence}
		if ok || err != nil {
			return data, err
		}
		dead := !alive(r.PID)
		select {
		case <-exited:
			dead = true
		default:
		}
		if dead {
			return data, caperr.New(caperr.StartupError, "%s exited before it was ready: %s", r.Name, tail(r.LogPath))
		}
		if time.Now().After(deadline) {
			return data, caperr.New(caperr.ReadinessTimeout, "%s was not ready within %s (%s)", r.Name, timeout, p.last())
		}
		select {
		case <-ctx.Done():
			return data, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
