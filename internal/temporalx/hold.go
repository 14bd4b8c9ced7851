package temporalx

import (
	"context"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// activityEnds are the calls that report an attempt's end to the server.
var activityEnds = map[string]bool{
	workflowservice.WorkflowService_RespondActivityTaskCompleted_FullMethodName:     true,
	workflowservice.WorkflowService_RespondActivityTaskCompletedById_FullMethodName: true,
	workflowservice.WorkflowService_RespondActivityTaskFailed_FullMethodName:        true,
	workflowservice.WorkflowService_RespondActivityTaskFailedById_FullMethodName:    true,
	workflowservice.WorkflowService_RespondActivityTaskCanceled_FullMethodName:      true,
	workflowservice.WorkflowService_RespondActivityTaskCanceledById_FullMethodName:  true,
}

// HoldFor bounds how long a worker holds an attempt's end for an
// unreachable server; a step's heartbeat timeout (a minute by default) has
// the server time the attempt out well before.
const HoldFor = 10 * time.Minute

// HoldActivityEnds makes a worker's report of an attempt's end wait for a
// server it cannot reach until the server answers (or HoldFor passes). The
// SDK tries for 10 s and drops the report: a step that ended while a
// server restarted for longer was lost until its heartbeat timed out, a
// minute later, and then ran again (TestServerRestartMidRun; make
// cluster-test's server on PostgreSQL can take that long to come back).
// Once the server answers, an attempt it still knows completes as usual;
// one it timed out meanwhile gets NotFound, as without the wait.
func HoldActivityEnds(log hclog.Logger) func(*client.Options) {
	return func(o *client.Options) {
		o.ConnectionOptions.DialOptions = append(o.ConnectionOptions.DialOptions,
			grpc.WithChainUnaryInterceptor(holdActivityEnds(log, HoldFor, time.Second)))
	}
}

// holdActivityEnds retries an attempt's end while the server is away,
// each try on a context of its own (the caller's deadline, the SDK's
// 10 s, does not end it), pause doubling up to maxPause between tries.
func holdActivityEnds(log hclog.Logger, limit, pause time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if !activityEnds[method] {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		base, start, wait := context.WithoutCancel(ctx), time.Now(), pause
		for try := 0; ; try++ {
			tctx, cancel := context.WithTimeout(base, 10*time.Second)
			err := invoker(tctx, method, req, reply, cc, opts...)
			cancel()
			held := try > 0
			switch {
			case !held && !serverAway(err):
				return err
			case !held:
				log.Warn("the Temporal server is unreachable: a step's end waits until it answers", "error", err.Error())
			case !stillAway(err):
				log.Info("the Temporal server answers again: a step's end reported", "held", time.Since(start).Round(time.Second).String(), "answer", status.Code(err).String())
				return err
			}
			if time.Since(start)+wait > limit {
				log.Warn("gave up holding a step's end: the Temporal server did not answer", "held", time.Since(start).Round(time.Second).String(), "error", err.Error())
				return err
			}
			// Backing off, each end at its own times: a server that says
			// it is unavailable is not asked by every held end at once.
			time.Sleep(wait/2 + rand.N(wait/2+1))
			wait = min(2*wait, maxPause)
		}
	}
}

// maxPause is the longest wait between tries of a held end: short beside
// a step's heartbeat timeout (a minute by default), which a server back
// from a restart starts counting down.
const maxPause = 5 * time.Second

// serverAway reports whether a call failed for want of a server: none
// listening, or one that says it is unavailable (starting, or without its
// database). Not a deadline: a server that is there but slow may have
// taken the end already, and sending it again every 10 s for minutes
// would hold the worker's slot and load the server (found attacking it).
// Nor a certificate refused in the TLS handshake (the server's by this
// worker, or this worker's by it), which gRPC also calls unavailable: a
// server that is there and refuses is a configuration to fix, not a
// restart to wait out. A handshake cut short (EOF, reset, a deadline: a
// server or its load balancer restarting) is still waited out.
func serverAway(err error) bool {
	return status.Code(err) == codes.Unavailable && !certificateRefused(status.Convert(err).Message())
}

// certificateRefused reports whether TLS failed on a certificate (in the
// handshake, or, with TLS 1.3, as the server's first answer after it), or
// met a server that speaks no TLS: each is a configuration to fix.
func certificateRefused(msg string) bool {
	if strings.Contains(msg, "first record does not look like a TLS handshake") {
		return true
	}
	if !strings.Contains(msg, "authentication handshake failed") && !strings.Contains(msg, "remote error: tls:") {
		return false
	}
	for _, s := range []string{"x509: ", "tls: failed to verify certificate", "bad certificate", "unknown certificate", "unsupported certificate",
		"revoked certificate", "certificate required", "expired certificate", "certificate expired"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// stillAway is serverAway for an end already held: past the SDK's own
// 10 s, its retries of a server's passing trouble (busy, aborted,
// internal) are this loop's to make, or the end is lost after all. A
// message too large is not passing.
func stillAway(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable:
		return serverAway(err)
	case codes.Aborted, codes.Internal:
		return true
	case codes.ResourceExhausted:
		return !strings.Contains(status.Convert(err).Message(), "larger than max")
	}
	return false
}
