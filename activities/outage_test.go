package activities

import (
	"context"
	"errors"
	"testing"
	"time"
)

// An attempt whose deadline passed ends the tool's context by its
// deadline, never by a cancellation racing it: the tool reports a
// timeout, which is recorded as an attempt.
func TestOutageContextTimesOutAtTheDeadline(t *testing.T) {
	a := &Activities{}
	for i := range 200 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		tctx, stop := a.rideOutOutages(ctx, func() any { return nil })
		<-tctx.Done()
		err := tctx.Err()
		stop()
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("try %d: the tool's context ended %v, not by its deadline", i, err)
		}
	}
}

// A cancelled attempt cancels the tool.
func TestOutageContextPassesACancellationOn(t *testing.T) {
	a := &Activities{}
	ctx, cancel := context.WithCancel(context.Background())
	tctx, stop := a.rideOutOutages(ctx, func() any { return nil })
	defer stop()
	cancel()
	select {
	case <-tctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the tool's context outlived its attempt's cancellation")
	}
	if !errors.Is(tctx.Err(), context.Canceled) {
		t.Fatalf("the tool's context ended %v", tctx.Err())
	}
}
