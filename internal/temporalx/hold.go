package temporalx

import (
	"context"
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
// each try on a context of its own: the caller's deadline (the SDK's 10 s)
// does not end it.
func holdActivityEnds(log hclog.Logger, limit, pause time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if !activityEnds[method] {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		base, start := context.WithoutCancel(ctx), time.Now()
		for try := 0; ; try++ {
			tctx, cancel := context.WithTimeout(base, 10*time.Second)
			err := invoker(tctx, method, req, reply, cc, opts...)
			cancel()
			switch {
			case try == 0 && serverAway(err):
				log.Warn("the Temporal server is unreachable: a step's end waits until it answers", "error", err.Error())
			case try > 0 && !serverAway(err):
				log.Info("the Temporal server answers again: a step's end reported", "held", time.Since(start).Round(time.Second).String(), "answer", status.Code(err).String())
			}
			if !serverAway(err) || time.Since(start)+pause > limit {
				return err
			}
			time.Sleep(pause)
		}
	}
}

// serverAway reports whether a call failed for want of a server: not
// listening, starting, or not answering in time.
func serverAway(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}
