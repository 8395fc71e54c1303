package triage_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/triagehq/triage"
)

// A periodic task: every night at 02:00 Berlin time (DST handled), one
// cleanup task, exactly once per night however many promoters run.
func ExampleClient_PutSchedule() {
	ctx := context.Background()
	c := triage.NewClient(triage.HTTP("http://127.0.0.1:8080", os.Getenv("TRIAGE_TOKEN")))

	s, created, err := c.PutSchedule(ctx, triage.Schedule{
		Name:     "nightly-cleanup",
		Cron:     "0 2 * * *",
		Timezone: "Europe/Berlin",
		Task:     triage.SubmitRequest{Type: "cleanup", Priority: "low", Payload: []byte(`{"older_than_days":30}`)},
	})
	var e *triage.Error
	switch {
	case errors.Is(err, triage.ErrBadRequest) && errors.As(err, &e):
		log.Fatalf("field %s: %s", e.Field, e.Message) // cron, timezone, task.type, ...
	case err != nil:
		log.Fatal(err)
	}
	fmt.Println(created, s.NextTick)

	// Stop it for a while; resuming starts at the next tick after now.
	if _, err := c.PauseSchedule(ctx, "nightly-cleanup"); err != nil {
		log.Fatal(err)
	}
}
