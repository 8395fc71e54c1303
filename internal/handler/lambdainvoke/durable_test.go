package lambdainvoke

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/durable"
	"github.com/triagehq/triage/internal/task"
)

// A function that records a step per invocation and then sleeps gets
// its records in the next event, and its sleep suspends the task.
func TestHandleDurableSteps(t *testing.T) {
	var events []durable.Records
	var calls func() []invocation
	var srv *httptest.Server
	srv, calls = fakeLambda(t, func(w http.ResponseWriter, r *http.Request) {
		all := calls()
		var ev durable.Records
		if err := json.Unmarshal(all[len(all)-1].body, &ev); err != nil {
			t.Errorf("event: %v", err)
		}
		events = append(events, ev)
		reply := `{"triage_durable":{"steps":[{"name":"resize","result":{"w":64}}]}}`
		if len(ev.Steps) == 1 {
			reply = `{"triage_durable":{"sleep":{"seconds":60}}}`
		}
		functionResult("", reply)(w, r)
	})
	h := New(client(srv), testARN)
	req := testRequest()
	st := durable.New(nil, nil, 1, nil, time.Now)
	req.Durable = st
	_, err := h.Handle(context.Background(), req)
	se, ok := durable.SuspendOf(err)
	if !ok || time.Until(se.WakeAt) < 59*time.Second {
		t.Fatalf("Handle: %v; want a sleep of a minute", err)
	}
	if len(calls()) != 2 || len(events[1].Steps) != 1 || string(events[1].Steps[0].Result) != `{"w":64}` {
		t.Fatalf("events %+v", events)
	}
	recs := st.Steps()
	if len(recs) != 2 || recs[0].Name != "resize" || recs[1].Kind != task.StepSleep {
		t.Fatalf("records %+v", recs)
	}
}
