package events_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/events"
	"github.com/triagehq/triage/internal/handler/webhook"
)

func TestParseTargets(t *testing.T) {
	cases := []struct {
		in      string
		want    []events.Target
		wantErr bool
	}{
		{in: "", want: nil},
		{in: "https://a.example/hook", want: []events.Target{{URL: "https://a.example/hook"}}},
		{in: "https://a.example/h?x=1, task.completed+task.dead_lettered=http://127.0.0.1:9/done?k=v", want: []events.Target{
			{URL: "https://a.example/h?x=1"},
			{URL: "http://127.0.0.1:9/done?k=v", Types: []events.Type{events.Completed, events.DeadLettered}},
		}},
		{in: "task.exploded=https://a.example/", wantErr: true},
		{in: "ftp://a.example/", wantErr: true},
		{in: "not a url", wantErr: true},
	}
	for _, c := range cases {
		got, err := events.ParseTargets(c.in)
		if (err != nil) != c.wantErr || (!c.wantErr && !reflect.DeepEqual(got, c.want)) {
			t.Errorf("ParseTargets(%q) = %+v, %v; want %+v (error %v)", c.in, got, err, c.want, c.wantErr)
		}
	}
}

// receiver is a webhook endpoint on loopback that verifies each request's
// signature and answers with the next status of its script (200 after).
type receiver struct {
	mu     sync.Mutex
	script []int
	got    []string // event ids accepted, in order
	tries  int
	bad    []string // why a request failed verification
}

func newReceiver(t *testing.T, secret []byte, script ...int) (*receiver, string) {
	r := &receiver{script: script}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.tries++
		if err := webhook.Verify(secret, req.Header.Get(webhook.HeaderTimestamp), body, req.Header.Get(webhook.HeaderSignature), time.Now(), 0); err != nil {
			r.bad = append(r.bad, err.Error())
		}
		var e events.Event
		if err := json.Unmarshal(body, &e); err != nil || e.ID != req.Header.Get(events.HeaderEventID) || string(e.Type) != req.Header.Get(events.HeaderEventType) || e.TaskID != req.Header.Get(webhook.HeaderTaskID) {
			r.bad = append(r.bad, "headers do not match the body: "+string(body))
		}
		code := http.StatusOK
		if len(r.script) > 0 {
			code, r.script = r.script[0], r.script[1:]
		}
		if code == http.StatusOK {
			r.got = append(r.got, e.ID)
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	return r, srv.URL
}

func TestWebhooksDeliver(t *testing.T) {
	secret := []byte("s3cret")
	batch := []events.Event{
		{ID: "a-1", Type: events.Submitted, TaskID: "a"},
		{ID: "a-2", Type: events.Started, TaskID: "a"},
		{ID: "a-3", Type: events.Completed, TaskID: "a"},
	}
	cases := []struct {
		name    string
		types   []events.Type
		script  []int
		want    []string
		tries   int
		wantErr bool
	}{
		{name: "all in order", want: []string{"a-1", "a-2", "a-3"}, tries: 3},
		{name: "type filter", types: []events.Type{events.Completed}, want: []string{"a-3"}, tries: 1},
		{name: "5xx and 429 are tried again", script: []int{500, 429}, want: []string{"a-1", "a-2", "a-3"}, tries: 5},
		{name: "a refused event is skipped", script: []int{400}, want: []string{"a-2", "a-3"}, tries: 3},
		{name: "still failing: the rest wait for redelivery", script: []int{200, 503, 503, 503}, want: []string{"a-1"}, tries: 4, wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, u := newReceiver(t, secret, c.script...)
			w, err := events.NewWebhooks([]events.Target{{URL: u, Types: c.types}}, secret, events.WebhookOptions{Backoff: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			err = w.Publish(context.Background(), batch)
			if (err != nil) != c.wantErr {
				t.Fatalf("Publish error %v, want error %v", err, c.wantErr)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			if !reflect.DeepEqual(r.got, c.want) || r.tries != c.tries || len(r.bad) > 0 {
				t.Fatalf("accepted %v in %d tries (bad: %v); want %v in %d", r.got, r.tries, r.bad, c.want, c.tries)
			}
		})
	}
}

func TestWebhooksNeedASecret(t *testing.T) {
	if _, err := events.NewWebhooks([]events.Target{{URL: "https://a.example/"}}, nil, events.WebhookOptions{}); err == nil {
		t.Fatal("NewWebhooks accepted an empty secret")
	}
}
