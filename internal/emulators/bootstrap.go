package emulators

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/triagetype"
)

// Resources are the queue URLs Bootstrap created or found.
type Resources struct {
	QueueURLs map[triagetype.Priority]string
	DLQURLs   map[triagetype.Priority]string
}

// Bootstrap creates the table (keys, GSIs, TTL), the queues (each with its
// DLQ and redrive policy) and the bucket that s describes. Resources that
// exist are left as they are, so it is safe to run on every start.
func Bootstrap(ctx context.Context, ddb *dynamodb.Client, q *sqs.Client, b *s3.Client, s spec.Spec) (Resources, error) {
	if err := createTable(ctx, ddb, s.Table); err != nil {
		return Resources{}, err
	}
	if err := createBucket(ctx, b, s.Bucket.Name); err != nil {
		return Resources{}, err
	}
	res := Resources{QueueURLs: map[triagetype.Priority]string{}, DLQURLs: map[triagetype.Priority]string{}}
	for _, qs := range s.Queues {
		dlqURL, err := createQueue(ctx, q, qs.DLQName, map[string]string{
			string(sqstypes.QueueAttributeNameMessageRetentionPeriod): seconds(qs.DLQRetention.Seconds()),
		})
		if err != nil {
			return res, err
		}
		attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl:       &dlqURL,
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
		})
		if err != nil {
			return res, fmt.Errorf("get arn of %s: %w", qs.DLQName, err)
		}
		redrive, err := json.Marshal(map[string]string{
			"deadLetterTargetArn": attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)],
			"maxReceiveCount":     strconv.Itoa(qs.MaxReceiveCount),
		})
		if err != nil {
			return res, err
		}
		url, err := createQueue(ctx, q, qs.Name, map[string]string{
			string(sqstypes.QueueAttributeNameVisibilityTimeout):      seconds(qs.VisibilityTimeout.Seconds()),
			string(sqstypes.QueueAttributeNameMessageRetentionPeriod): seconds(qs.RetentionPeriod.Seconds()),
			string(sqstypes.QueueAttributeNameRedrivePolicy):          string(redrive),
		})
		if err != nil {
			return res, err
		}
		res.QueueURLs[qs.Priority] = url
		res.DLQURLs[qs.Priority] = dlqURL
	}
	return res, nil
}

// createBucket creates the bucket unless this account already has it.
func createBucket(ctx context.Context, b *s3.Client, name string) error {
	_, err := b.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &name})
	var owned *s3types.BucketAlreadyOwnedByYou
	var exists *s3types.BucketAlreadyExists
	if err != nil && !errors.As(err, &owned) && !errors.As(err, &exists) {
		return fmt.Errorf("create bucket %s: %w", name, err)
	}
	return nil
}

func seconds(f float64) string { return strconv.Itoa(int(f)) }

func createQueue(ctx context.Context, q *sqs.Client, name string, attrs map[string]string) (string, error) {
	out, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: attrs})
	if err != nil {
		return "", fmt.Errorf("create queue %s: %w", name, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

func createTable(ctx context.Context, ddb *dynamodb.Client, t spec.Table) error {
	defs := map[string]bool{t.PartitionKey: true}
	in := &dynamodb.CreateTableInput{
		TableName:   &t.Name,
		BillingMode: ddbtypes.BillingModePayPerRequest,
		KeySchema:   []ddbtypes.KeySchemaElement{{AttributeName: aws.String(t.PartitionKey), KeyType: ddbtypes.KeyTypeHash}},
	}
	for _, ix := range t.Indexes {
		defs[ix.PartitionKey], defs[ix.SortKey] = true, true
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, ddbtypes.GlobalSecondaryIndex{
			IndexName: aws.String(ix.Name),
			KeySchema: []ddbtypes.KeySchemaElement{
				{AttributeName: aws.String(ix.PartitionKey), KeyType: ddbtypes.KeyTypeHash},
				{AttributeName: aws.String(ix.SortKey), KeyType: ddbtypes.KeyTypeRange},
			},
			Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionType(ix.Projection), NonKeyAttributes: ix.NonKeyAttributes},
		})
	}
	if t.Stream != "" {
		in.StreamSpecification = &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewType(t.Stream)}
	}
	for _, name := range sortedKeys(defs) {
		in.AttributeDefinitions = append(in.AttributeDefinitions, ddbtypes.AttributeDefinition{
			AttributeName: aws.String(name), AttributeType: ddbtypes.ScalarAttributeTypeS,
		})
	}
	_, err := ddb.CreateTable(ctx, in)
	var inUse *ddbtypes.ResourceInUseException
	switch {
	case errors.As(err, &inUse):
		// The table exists already.
	case err != nil:
		return fmt.Errorf("create table %s: %w", t.Name, err)
	}
	if err := dynamodb.NewTableExistsWaiter(ddb).Wait(ctx, &dynamodb.DescribeTableInput{TableName: &t.Name}, maxWait); err != nil {
		return fmt.Errorf("wait for table %s: %w", t.Name, err)
	}
	ttl, err := ddb.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &t.Name})
	if err != nil {
		return fmt.Errorf("describe TTL of %s: %w", t.Name, err)
	}
	if d := ttl.TimeToLiveDescription; d != nil && d.TimeToLiveStatus == ddbtypes.TimeToLiveStatusEnabled {
		return nil
	}
	_, err = ddb.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: &t.Name,
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{
			AttributeName: aws.String(t.TTLAttribute), Enabled: aws.Bool(true),
		},
	})
	if err != nil {
		return fmt.Errorf("enable TTL on %s: %w", t.Name, err)
	}
	return nil
}

const maxWait = 60 * time.Second // the longest a local table takes to become active

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
