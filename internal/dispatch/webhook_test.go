package dispatch_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/handler/webhook"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
)

func TestWebhookHandler(t *testing.T) {
	secret := "whsec-test"
	var mu sync.Mutex
	calls := map[string]int{}
	var badSignatures int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify([]byte(secret), r.Header.Get(webhook.HeaderTimestamp), body, r.Header.Get(webhook.HeaderSignature), time.Now(), time.Minute); err != nil {
			mu.Lock()
			badSignatures++
			mu.Unlock()
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var req struct {
			ID      string `json:"id"`
			Payload struct {
				Status int `json:"status"`
			} `json:"payload"`
		}
		_ = json.Unmarshal(body, &req)
		mu.Lock()
		calls[req.ID]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(req.Payload.Status)
		_ = json.NewEncoder(w).Encode(map[string]string{"status_was": http.StatusText(req.Payload.Status)})
	}))
	defer srv.Close()

	env := stacktest.New(t)
	a := env.App(t, map[string]string{triageconfig.EnvRoutes: "hook=" + srv.URL + "/tasks", triageconfig.EnvWebhookSecret: secret})
	reg, err := consumerapp.Handlers(a)
	if err != nil {
		t.Fatal(err)
	}
	ok := submitOne(t, a, task.Request{Type: "hook", Priority: "high", Payload: json.RawMessage(`{"status":200}`)})
	rejected := submitOne(t, a, task.Request{Type: "hook", Priority: "high", Payload: json.RawMessage(`{"status":422}`), MaxAttempts: intp(3)})
	broken := submitOne(t, a, task.Request{Type: "hook", Priority: "high", Payload: json.RawMessage(`{"status":503}`), MaxAttempts: intp(2)})
	opt := stacktest.FastDispatch()
	opt.Backoff = map[triagetype.Priority]triageconfig.Backoff{triagetype.High: {Base: time.Second, Max: time.Second}}
	stacktest.Run(t, consumerapp.New(a, reg, opt, dispatch.Deps{}))

	done := stacktest.WaitStatus(t, a.Store, ok.ID, triagetype.Completed, 20*time.Second)
	if string(done.Result) != `{"status_was":"OK"}` {
		t.Errorf("2xx result = %s", done.Result)
	}
	dead := stacktest.WaitStatus(t, a.Store, rejected.ID, triagetype.DeadLetter, 20*time.Second)
	if dead.Attempts != 1 || dead.Error.Retriable || !strings.Contains(dead.Error.Message, "422") {
		t.Errorf("4xx: attempts %d error %+v; want one attempt, not retriable", dead.Attempts, dead.Error)
	}
	failed := stacktest.WaitStatus(t, a.Store, broken.ID, triagetype.DeadLetter, 30*time.Second)
	if failed.Attempts != 2 || !failed.Error.Retriable || !strings.Contains(failed.Error.Message, "503") {
		t.Errorf("5xx: attempts %d error %+v; want retried until attempts ran out", failed.Attempts, failed.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if badSignatures != 0 {
		t.Errorf("%d requests failed signature verification", badSignatures)
	}
	if calls[ok.ID] != 1 || calls[rejected.ID] != 1 || calls[broken.ID] != 2 {
		t.Errorf("calls per task: %v", calls)
	}
}
