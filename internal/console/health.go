package console

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// While Temporal does not answer, every request about runs would wait out
// the client's retries (10-20 s each, the page's controls live meanwhile):
// one health check answers them all at once. A failed one is remembered
// for downFor, a good one for upFor (a server killed meanwhile is noticed
// by the next request but one).
const (
	healthWait = 1500 * time.Millisecond
	downFor    = 2 * time.Second
	upFor      = 500 * time.Millisecond
)

// health is the last health check of Temporal's frontend.
type health struct {
	mu  sync.Mutex
	at  time.Time
	err error
}

// temporalDown is why Temporal does not answer now (nil when it does),
// checked at most once per downFor while it is down, upFor while up.
func (s *Server) temporalDown(ctx context.Context) error {
	h := &s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if keep := map[bool]time.Duration{true: downFor, false: upFor}[h.err != nil]; time.Since(h.at) < keep {
		return h.err
	}
	cctx, cancel := context.WithTimeout(ctx, healthWait)
	defer cancel()
	h.err, h.at = s.o.Client.CheckHealth(cctx), time.Now()
	if h.err != nil {
		h.err = s.unreachable(h.err)
	}
	return h.err
}

// needsTemporal answers 502 at once while Temporal does not answer.
func (s *Server) needsTemporal(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := s.temporalDown(r.Context()); err != nil {
			writeError(w, http.StatusBadGateway, err)
			return
		}
		next(w, r)
	}
}
