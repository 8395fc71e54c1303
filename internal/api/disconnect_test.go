package api_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/counters"
	"github.com/triagehq/triage/internal/emulators/stacktest"
)

// slowCounters answers /stats only when the request's context ends, as a
// slow read does when the browser tab that asked is closed.
type slowCounters struct{ asked chan struct{} }

func (c slowCounters) Read(ctx context.Context) (counters.Snapshot, error) {
	close(c.asked)
	<-ctx.Done()
	return counters.Snapshot{}, fmt.Errorf("read counters: %w", ctx.Err())
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestClientDisconnectIsNotAnError: a /stats request whose client goes
// away (a closed dashboard tab) used to log `level=ERROR msg="collect
// stats failed" … context canceled`; nothing failed on the server, so it
// logs at Debug.
func TestClientDisconnectIsNotAnError(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	toks, err := auth.Parse("ro:read")
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	c := slowCounters{asked: make(chan struct{})}
	srv := api.New(api.Deps{Store: a.Store, Enqueuer: a.Enqueuer, Queues: a.Queues, Controls: a.Controls, Counters: c, Tokens: toks},
		api.Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/api/v1/stats", nil)
	req.Header.Set("Authorization", "Bearer ro")
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.ServeHTTP(httptest.NewRecorder(), req)
	}()
	select {
	case <-c.asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never read the counters")
	}
	cancel()
	<-done
	out := logs.String()
	if strings.Contains(out, "level=ERROR") {
		t.Errorf("a client disconnect was logged as an error:\n%s", out)
	}
	if !strings.Contains(out, "client disconnected") {
		t.Errorf("no debug line for the disconnect:\n%s", out)
	}
}
