package temporalx

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// ends answers attempts' ends: completions succeed, failures name an
// attempt the server no longer knows.
type ends struct {
	workflowservice.UnimplementedWorkflowServiceServer
	completed, failed atomic.Int32
}

func (e *ends) RespondActivityTaskCompleted(context.Context, *workflowservice.RespondActivityTaskCompletedRequest) (*workflowservice.RespondActivityTaskCompletedResponse, error) {
	e.completed.Add(1)
	return &workflowservice.RespondActivityTaskCompletedResponse{}, nil
}

func (e *ends) RespondActivityTaskFailed(context.Context, *workflowservice.RespondActivityTaskFailedRequest) (*workflowservice.RespondActivityTaskFailedResponse, error) {
	e.failed.Add(1)
	return nil, serviceerror.ToStatus(serviceerror.NewNotFound("invalid activityID or activity already timed out")).Err()
}

// serve starts a WorkflowService of ends on addr and stops it with the test.
func serve(t *testing.T, addr string, e *ends) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	workflowservice.RegisterWorkflowServiceServer(s, e)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
}

// A free address nothing listens on yet.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func dialHeld(t *testing.T, addr string, limit time.Duration) workflowservice.WorkflowServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(holdActivityEnds(hclog.NewNullLogger(), limit, 50*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return workflowservice.NewWorkflowServiceClient(conn)
}

// An attempt's end reported while no server listens outlives its caller's
// deadline and reaches the server once it is there; other calls, and ends
// the server answers, go as they came.
func TestAnAttemptsEndWaitsForTheServer(t *testing.T) {
	addr := freeAddr(t)
	c := dialHeld(t, addr, time.Minute)
	e := &ends{}
	time.AfterFunc(700*time.Millisecond, func() { serve(t, addr, e) })

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := c.RespondActivityTaskCompleted(ctx, &workflowservice.RespondActivityTaskCompletedRequest{}); err != nil {
		t.Fatalf("the end was not held for the server: %v", err)
	}
	if n := e.completed.Load(); n != 1 {
		t.Fatalf("the server got %d completions, want 1", n)
	}
	_, err := c.RespondActivityTaskFailed(context.Background(), &workflowservice.RespondActivityTaskFailedRequest{})
	if status.Code(err) != codes.NotFound || e.failed.Load() != 1 {
		t.Fatalf("an answered end was tried again or changed: %v, %d tries", err, e.failed.Load())
	}
}

// Calls other than an attempt's end fail as they would (the SDK retries
// its own), and an end gives up after its limit.
func TestOnlyEndsAreHeldAndNotForever(t *testing.T) {
	c := dialHeld(t, freeAddr(t), 300*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.GetSystemInfo(ctx, &workflowservice.GetSystemInfoRequest{})
	if code := status.Code(err); code != codes.Unavailable && code != codes.DeadlineExceeded {
		t.Fatalf("GetSystemInfo with no server: %v", err)
	}
	_, err = c.RespondActivityTaskCompleted(context.Background(), &workflowservice.RespondActivityTaskCompletedRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("an end with no server past its limit: %v", err)
	}
}
