package api_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/events"
)

// eventsServer is the API with only what GET /api/v1/events needs, on a
// loopback server with short read and write timeouts (as `triage dev` has
// long ones).
func eventsServer(t *testing.T, b *events.Broker) string {
	t.Helper()
	toks, err := auth.Parse("ro:read,sub:submit")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(api.New(api.Deps{Tokens: toks}, api.Options{Events: b}))
	srv.Config.ReadTimeout, srv.Config.WriteTimeout = time.Second, time.Second
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestEventsEndpoint(t *testing.T) {
	b := events.NewBroker(1)
	base := eventsServer(t, b)
	get := func(token, query string) *http.Response {
		req, _ := http.NewRequest("GET", base+"/api/v1/events"+query, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, c := range []struct {
		token, query string
		want         int
	}{
		{"", "", 401},
		{"sub", "", 403},
		{"ro", "?type=task.exploded", 400},
		{"ro", "?task_id=not%20an%20id", 400},
	} {
		resp := get(c.token, c.query)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("token %q query %q: %d, want %d", c.token, c.query, resp.StatusCode, c.want)
		}
	}

	// A stream outlives the server's read and write timeouts, gets only
	// what its filter selects, and a subscriber that falls behind is told
	// why it was dropped.
	resp := get("ro", "?type=task.completed")
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET /api/v1/events = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() string {
		select {
		case l, ok := <-lines:
			if !ok {
				return "(end of stream)"
			}
			return l
		case <-time.After(5 * time.Second):
			return "(nothing for 5 s)"
		}
	}
	for _, want := range []string{"retry: 2000", ": subscribed", ""} {
		if got := next(); got != want {
			t.Fatalf("stream opened with %q, want %q", got, want)
		}
	}
	time.Sleep(2500 * time.Millisecond) // past both timeouts
	_ = b.Publish(context.Background(), []events.Event{
		{ID: "a-1", Type: events.Started, TaskID: "a"},
		{ID: "a-2", Type: events.Completed, TaskID: "a"},
	})
	for _, want := range []string{"id: a-2", "event: task.completed", `data: {"id":"a-2","type":"task.completed"`, ""} {
		if got := next(); !strings.HasPrefix(got, want) || (want == "" && got != "") {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	// Buffer 1: a thousand events in one publish overflow it long before
	// the handler has written them out.
	burst := make([]events.Event, 1000)
	for i := range burst {
		burst[i] = events.Event{ID: "b-" + strconv.Itoa(i), Type: events.Completed, TaskID: "b"}
	}
	_ = b.Publish(context.Background(), burst)
	var rest []string
	for l := next(); l != "(end of stream)" && l != "(nothing for 5 s)"; l = next() {
		rest = append(rest, l)
	}
	if len(rest) == 0 || rest[len(rest)-2] != ": dropped: "+events.ReasonSlow {
		t.Fatalf("after overflowing the buffer the stream ended with %q, want a drop comment", rest)
	}
}

// Without an event source (the Lambda-hosted API) the route explains
// where the events are instead.
func TestEventsEndpointWithoutSource(t *testing.T) {
	toks, _ := auth.Parse("ro:read")
	srv := httptest.NewServer(api.New(api.Deps{Tokens: toks}, api.Options{}))
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest("GET", srv.URL+"/api/v1/events", nil)
	req.Header.Set("Authorization", "Bearer ro")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&body)
	if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(body.String(), "EventBridge") || !strings.Contains(body.String(), "TRIAGE_EVENT_WEBHOOKS") {
		t.Fatalf("%d %s", resp.StatusCode, body.String())
	}
}
