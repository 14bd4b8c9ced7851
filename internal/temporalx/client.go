// Package temporalx dials Temporal from capflow's configuration (address,
// namespace, TLS, API key) and makes sure the search attributes exist.
package temporalx

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/capflow/capflow/codec"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/wfapi"
)

// DialTimeout bounds how long capflow waits for an unreachable server.
const DialTimeout = 5 * time.Second

// Dial connects, failing fast with a clear message when the server is
// not there. extra adjusts the options (a worker adds its metrics handler).
func Dial(ctx context.Context, cfg *config.Config, log hclog.Logger, extra ...func(*client.Options)) (client.Client, error) {
	opts := client.Options{HostPort: cfg.Temporal.Address, Namespace: cfg.Temporal.Namespace, Logger: log}
	if Loopback(cfg.Temporal.Address) {
		// gzip on every request and answer costs CPU on both ends and
		// saves nothing on this machine's loopback (a 500-step run spent
		// ~3% of the worker's CPU compressing); elsewhere the SDK's gzip.
		opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
	}
	// Always the codec: with no key it passes payloads through and names
	// the missing key when it meets an encrypted one.
	cd, err := PayloadCodec()
	if err != nil {
		return nil, caperr.Wrap(caperr.ConfigError, err, "payload encryption")
	}
	opts.DataConverter, opts.FailureConverter = cd.DataConverter(), cd.FailureConverter()
	for _, f := range extra {
		f(&opts)
	}
	if cfg.Temporal.APIKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(cfg.Temporal.APIKey)
	}
	if t := cfg.Temporal.TLS; t.Enabled || t.Cert != "" || t.CA != "" {
		tc, err := tlsConfig(t)
		if err != nil {
			return nil, err
		}
		opts.ConnectionOptions.TLS = tc
	}
	// A quick TCP probe gives a clear error at once instead of a gRPC
	// retry loop.
	if host := cfg.Temporal.Address; !strings.Contains(host, "://") {
		conn, err := net.DialTimeout("tcp", host, DialTimeout)
		if err != nil {
			return nil, caperr.New(caperr.DependencyUnavailable, "cannot reach the Temporal server at %s (%v); start one (temporal server start-dev; make dev in capflow's repository) or point capflow at yours (%s)", host, err, pointAt)
		}
		conn.Close()
	}
	dctx, cancel := context.WithTimeout(ctx, DialTimeout+5*time.Second)
	defer cancel()
	c, err := client.DialContext(dctx, opts)
	if err != nil && strings.Contains(err.Error(), "HTTP/1.1 header") {
		// The easy mistake: the Web UI's port for the server's.
		return nil, caperr.Wrap(caperr.DependencyUnavailable, err, "%s answers HTTP, not Temporal's gRPC: is it the Web UI's port? Point capflow at the server's (%s)", cfg.Temporal.Address, pointAt)
	}
	if err != nil {
		return nil, caperr.Wrap(caperr.DependencyUnavailable, err, "cannot connect to Temporal at %s (namespace %s)", cfg.Temporal.Address, cfg.Temporal.Namespace)
	}
	return c, nil
}

// pointAt is how a user points capflow at a Temporal server.
const pointAt = "temporal.address in capflow.yaml, CAPFLOW_TEMPORAL_ADDRESS or TEMPORAL_ADDRESS, or the CLI's --address; make dev prints its address"

// Loopback reports whether a Temporal address (HOST:PORT) is on this
// machine's loopback.
func Loopback(address string) bool {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// PayloadCodec is this process's payload codec, from the environment,
// made once (Dial, the decoders below and the worker's start-up line share
// it).
var PayloadCodec = sync.OnceValues(codec.FromEnv)

// DataConverter decodes what the client's own calls do not: payloads read
// from history, heartbeat details, memos. Without a usable key it is the
// default converter (Dial has reported the key's problem).
func DataConverter() converter.DataConverter {
	if cd, err := PayloadCodec(); err == nil {
		return cd.DataConverter()
	}
	return converter.GetDefaultDataConverter()
}

// FailureConverter is this process's failure converter: the codec's when
// payloads are encrypted, else the SDK's.
func FailureConverter() converter.FailureConverter {
	if cd, err := PayloadCodec(); err == nil {
		return cd.FailureConverter()
	}
	return temporal.GetDefaultFailureConverter()
}

// FailureMessage is a failure's message, decrypted when payloads are.
func FailureMessage(f *failurepb.Failure) string {
	fc := temporal.GetDefaultFailureConverter()
	if cd, err := PayloadCodec(); err == nil {
		fc = cd.FailureConverter()
	}
	if err := fc.FailureToError(f); err != nil {
		var app *temporal.ApplicationError
		if errors.As(err, &app) {
			return app.Message()
		}
		return err.Error()
	}
	return f.GetMessage()
}

func tlsConfig(t config.TLS) (*tls.Config, error) {
	tc := &tls.Config{ServerName: t.ServerName, MinVersion: tls.VersionTLS12}
	if t.Cert != "" || t.Key != "" {
		pair, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, caperr.Wrap(caperr.ConfigError, err, "temporal.tls cert/key")
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	if t.CA != "" {
		pem, err := os.ReadFile(t.CA)
		if err != nil {
			return nil, caperr.Wrap(caperr.ConfigError, err, "temporal.tls.ca")
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, caperr.New(caperr.ConfigError, "temporal.tls.ca %s holds no PEM certificate", t.CA)
		}
		tc.RootCAs = pool
	}
	return tc, nil
}

// EnsureSearchAttributes registers CapflowPlan and CapflowStatus when
// missing. It returns false (and logs why) when they are not usable, in
// which case workflows do not upsert them.
func EnsureSearchAttributes(ctx context.Context, c client.Client, namespace string, log hclog.Logger) bool {
	added, err := ensureSearchAttributes(ctx, c, namespace)
	if err != nil {
		log.Warn("search attributes not usable; runs will not set them", "error", err)
		return false
	}
	if len(added) > 0 {
		log.Info("registered search attributes", "names", fmt.Sprint(added))
	}
	return true
}

// KeepSearchAttributes registers them again whenever the server lost them
// (a dev server keeps nothing across a restart: every run's workflow task
// would fail on its upsert until a worker restarted), every period until
// ctx ends.
func KeepSearchAttributes(ctx context.Context, c client.Client, namespace string, period time.Duration, log hclog.Logger) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if added, err := ensureSearchAttributes(ctx, c, namespace); err == nil && len(added) > 0 {
				log.Warn("registered search attributes again: the server had lost them (a dev server restarted?)", "names", fmt.Sprint(added))
			}
		}
	}
}

func ensureSearchAttributes(ctx context.Context, c client.Client, namespace string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	op := c.OperatorService()
	have, err := op.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, fmt.Errorf("cannot list them: %w", err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for _, name := range []string{wfapi.SearchAttrPlan, wfapi.SearchAttrStatus} {
		if _, ok := have.CustomAttributes[name]; !ok {
			missing[name] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	if _, err = op.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: namespace, SearchAttributes: missing}); err != nil {
		return nil, fmt.Errorf("cannot register %v: %w", keys(missing), err)
	}
	return keys(missing), nil
}

func keys(m map[string]enumspb.IndexedValueType) []string {
	return slices.Sorted(maps.Keys(m))
}

// UIBase is the Web UI runs are linked to: temporal.ui_url, else
// CAPFLOW_UI_URL, else the frontend's host with its port + 1000, where the
// dev server (its --ui-port default) and make cluster serve it.
func UIBase(t config.Temporal) string {
	for _, u := range []string{t.UIURL, os.Getenv("CAPFLOW_UI_URL")} {
		if u != "" {
			return strings.TrimRight(u, "/")
		}
	}
	host, port, err := net.SplitHostPort(t.Address)
	if err != nil || host == "" {
		host = "localhost"
	}
	ui := "8233"
	if n, err := strconv.Atoi(port); err == nil && n > 0 && n+1000 <= 65535 {
		ui = strconv.Itoa(n + 1000)
	}
	return "http://" + net.JoinHostPort(host, ui)
}

// RunURL links to a run in the Web UI.
func RunURL(t config.Temporal, workflowID, runID string) string {
	return fmt.Sprintf("%s/namespaces/%s/workflows/%s/%s/history", UIBase(t), t.Namespace, workflowID, runID)
}
