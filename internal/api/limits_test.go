package api_test

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
)

// The OpenAPI document states the same input limits the code enforces:
// the Go constants own them, and this test keeps the document honest.
func TestOpenAPILimitsMatchTheCode(t *testing.T) {
	var doc struct {
		Info struct {
			Description string `json:"description"`
		} `json:"info"`
		Components struct {
			Schemas map[string]struct {
				Description string                    `json:"description"`
				Properties  map[string]map[string]any `json:"properties"`
			} `json:"schemas"`
			Parameters map[string]struct {
				Schema map[string]any `json:"schema"`
			} `json:"parameters"`
		} `json:"components"`
	}
	b, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	sub := doc.Components.Schemas["SubmitRequest"].Properties
	batch := doc.Components.Schemas["BatchRequest"]
	for _, c := range []struct {
		name string
		got  any
		want int
	}{
		{"type maxLength", sub["type"]["maxLength"], task.MaxTypeLength},
		{"idempotency_key maxLength", sub["idempotency_key"]["maxLength"], task.MaxIdempotencyKey},
		{"trace_id maxLength", sub["trace_id"]["maxLength"], task.MaxTraceID},
		{"max_attempts maximum", sub["max_attempts"]["maximum"], task.MaxMaxAttempts},
		{"max_attempts default", sub["max_attempts"]["default"], task.DefaultMaxAttempts},
		{"timeout_seconds maximum", sub["timeout_seconds"]["maximum"], task.MaxTimeoutSeconds},
		{"timeout_seconds default", sub["timeout_seconds"]["default"], task.DefaultTimeoutSeconds},
		{"delay_seconds maximum", sub["delay_seconds"]["maximum"], task.MaxDelaySeconds},
		{"batch maxItems", batch.Properties["tasks"]["maxItems"], api.MaxBatch},
		{"replay type maxLength", doc.Components.Schemas["ReplayRequest"].Properties["type"]["maxLength"], task.MaxTypeLength},
		{"task id length", doc.Components.Parameters["TaskID"].Schema["maxLength"], 26},
		{"payload_size minimum", doc.Components.Schemas["Task"].Properties["payload_size"]["minimum"], store.InlineMax + 1},
		{"result_size minimum", doc.Components.Schemas["Task"].Properties["result_size"]["minimum"], store.InlineMax + 1},
	} {
		if f, ok := c.got.(float64); !ok || int(f) != c.want {
			t.Errorf("%s: the document says %v, the code %d", c.name, c.got, c.want)
		}
	}
	for _, c := range []struct {
		name, text string
		want       int
	}{
		{"payload bytes", sub["payload"]["description"].(string), task.MaxPayloadBytes},
		{"payload depth", sub["payload"]["description"].(string), task.MaxPayloadDepth},
		{"run_at fraction", sub["run_at"]["description"].(string), task.MaxRunAtFraction},
		{"inline payload", doc.Components.Schemas["Task"].Properties["payload"]["description"].(string), store.InlineMax},
		{"batch body", batch.Description, api.MaxBatchBody},
		{"submit body", doc.Info.Description, api.MaxBody},
		{"batch body (info)", doc.Info.Description, api.MaxBatchBody},
	} {
		if !strings.Contains(c.text, strconv.Itoa(c.want)) {
			t.Errorf("%s: %q does not state %d", c.name, c.text, c.want)
		}
	}
}
