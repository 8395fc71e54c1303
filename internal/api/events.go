package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/triagehq/triage/internal/events"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// EventSource is what GET /api/v1/events streams from: the in-process
// broker fed by the stream consumer of a long-lived server (events.Broker).
type EventSource interface {
	Subscribe(f events.Filter) *events.Subscription
}

// KeepAlive is how often an idle event stream gets a comment line, so
// proxies and clients do not time the connection out.
const KeepAlive = 15 * time.Second

// noEventsMessage tells a client of a server with no event source (the
// Lambda-hosted API: a request lives at most 30 s behind API Gateway and
// no process sees the stream) where the same events are.
const noEventsMessage = "live events (Server-Sent Events) are served only by a long-lived API server such as `triage dev`; " +
	"on AWS, the same events go to the EventBridge bus (the construct's Events prop) and to the webhooks in TRIAGE_EVENT_WEBHOOKS on the counters function"

// streamEvents serves Server-Sent Events: one "event: <type>" per
// lifecycle event, its id the event id and its data the event's JSON.
// Optional filters: type (repeated or comma-separated) and task_id. Events
// are delivered from the moment of subscription on (no replay: a client
// that reconnects reads the tasks' current state from the API); a
// subscriber that cannot keep up is dropped with a final comment saying so.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request) {
	if s.opt.Events == nil {
		writeError(w, http.StatusNotImplemented, triagetype.CodeNotImplemented, "", noEventsMessage)
		return
	}
	var f events.Filter
	for _, v := range r.URL.Query()["type"] {
		for name := range strings.SplitSeq(v, ",") {
			typ, err := events.ParseType(strings.TrimSpace(name))
			if err != nil {
				writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, "type", "type: "+err.Error())
				return
			}
			f.Types = append(f.Types, typ)
		}
	}
	if id := r.URL.Query().Get("task_id"); id != "" {
		if fe := task.CheckID(id); fe != nil {
			writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, "task_id", "task_id: "+fe.Error())
			return
		}
		f.TaskID = id
	}
	rc := http.NewResponseController(w)
	// The server's timeouts bound ordinary requests (a write deadline left
	// in place ends the stream when it passes); a stream lives until its
	// client leaves.
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	sub := s.opt.Events.Subscribe(f)
	defer sub.Close()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, "retry: 2000\n: subscribed\n\n"); err != nil || rc.Flush() != nil {
		return
	}
	tick := time.NewTicker(KeepAlive)
	defer tick.Stop()
	for {
		var err error
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
			_, err = fmt.Fprint(w, ": keep-alive\n\n")
		case ev, open := <-sub.C:
			if !open {
				_, _ = fmt.Fprintf(w, ": dropped: %s\n\n", sub.Reason())
				_ = rc.Flush()
				return
			}
			var data []byte
			if data, err = json.Marshal(ev); err == nil {
				_, err = fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", ev.ID, ev.Type, data)
			}
		}
		if err == nil {
			err = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}
