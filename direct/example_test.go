package direct_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/direct"
)

// A Lambda function deployed beside the dispatcher submits without the
// HTTP hop. The client, its options and its errors are those of package
// triage; only the transport differs.
func ExampleNew() {
	ctx := context.Background()
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// Options{} reads the deployment's TRIAGE_* settings from the
	// environment, as the dispatcher's own functions do.
	tr, err := direct.New(ctx, awsCfg, direct.Options{})
	if err != nil {
		log.Fatal(err) // no such deployment, or no rights to its queues
	}
	c := triage.NewClient(tr)

	t, created, err := c.Submit(ctx, "invoice", map[string]string{"order": "o-1234"},
		triage.WithPriority(triage.High), triage.WithIdempotencyKey("invoice-o-1234"))
	if errors.Is(err, triage.ErrTooMany) {
		log.Print("the high queue is over TRIAGE_MAX_QUEUE_DEPTH_HIGH; try later")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(t.ID, created)
}
