package triage_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/triagehq/triage"
)

// A batch with a completion callback: campaign-report is enqueued once,
// when every email has finished, with the counts in its payload
// (triagetype.BatchCallback). The batch stays open while members are added,
// 100 a request, and is sealed after the last.
func ExampleClient_CreateBatch() {
	ctx := context.Background()
	c := triage.NewClient(triage.HTTP("http://127.0.0.1:8080", os.Getenv("TRIAGE_TOKEN")))

	b, err := c.CreateBatch(ctx, triage.BatchCreate{
		Open:       true,
		OnComplete: &triage.SubmitRequest{Type: "campaign-report", Payload: []byte(`{"campaign":42}`)},
	})
	if err != nil {
		log.Fatal(err)
	}
	for page := range 3 {
		var rs []triage.SubmitRequest
		for i := range triage.MaxBatch {
			r, err := triage.NewRequest("email", map[string]int{"recipient": page*triage.MaxBatch + i})
			if err != nil {
				log.Fatal(err)
			}
			rs = append(rs, r)
		}
		added, err := c.AddToBatch(ctx, b.ID, rs)
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range added.Results {
			if err := r.Err(); err != nil {
				fmt.Println("member", r.Index, "refused:", err)
			}
		}
	}
	if _, err := c.SealBatch(ctx, b.ID); err != nil {
		log.Fatal(err)
	}
	// Progress is one O(1) read, however large the batch.
	b, err = c.GetBatch(ctx, b.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %d of %d done\n", b.State, b.Progress.Done, b.Progress.Total)
}
