package dispatcher

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"

	"github.com/triagehq/triage/internal/spec"
)

// Grants for code outside the construct, in the CDK's style: each takes
// an awsiam.IGrantable (a function, a role, an ECS task definition's task
// role, ...) and returns the awsiam.Grant. Each is least privilege for one
// job and names exactly the deployment's resources: no wildcard beyond the
// bucket's t/ objects and the API's /api/v1/ routes.

// GrantSubmitDirect lets grantee submit tasks through the Go direct
// transport (package github.com/triagehq/triage/direct): it validates a
// request as the API does, then sends the task's message and writes its
// record itself. That is, per call a submit makes:
//
//   - dynamodb:PutItem and dynamodb:GetItem on the table (not its indexes):
//     store.Create writes the task with PutItem, or, with an idempotency
//     key, in a TransactWriteItems whose two puts (key and task) IAM
//     authorizes as PutItem; GetItem reads an idempotency key
//     (ByIdempotencyKey, before sending) and the existing task when a key
//     or an id was taken. Index entries are attributes of the task's item:
//     writing them needs no grant on an index.
//   - sqs:SendMessage on the three queues: the task's message
//     (SendMessageBatch, which IAM authorizes as SendMessage).
//   - sqs:GetQueueAttributes on the three queues and their DLQs: the
//     queue-depth backpressure reads each queue's depth with its DLQ's
//     (queue.Queues.Depth). Without it every read fails, and a failed read
//     admits the task: backpressure would be silently off.
//   - sqs:GetQueueUrl on the same six: a producer looks up by name, when it
//     starts, every queue and DLQ whose URL it was not given
//     (queue.Resolve); direct.New takes the queues' URLs but not the
//     DLQs', so it always looks the DLQs up (which only works with
//     Props.PhysicalNames). Given all of ProducerEnvironment's URLs, a
//     producer looks nothing up. It reveals only those queues' URLs.
//   - dynamodb:UpdateItem and dynamodb:DeleteItem on the table's batch
//     items only (their keys begin with BATCH#: the condition
//     dynamodb:LeadingKeys): a batch member is counted on its batch's
//     shard in the transaction that writes it (one member), or in a member
//     add before the members are written, which the producer then deletes
//     (store/memberadd.go). No task item can be updated or deleted.
//   - s3:PutObject and s3:DeleteObject on the bucket's t/ objects: a
//     payload over 3 KiB is written there before the task's record, and
//     removed again when an idempotency key turns out to name another
//     task (internal/blob, store.Create).
//
// It does not cover reading tasks back (Get, List), cancelling or the
// admin calls of the direct transport; grant those separately (for example
// d.Table.GrantReadData and s3:GetObject on the objects), or use the HTTP
// API with GrantInvokeApi.
func (d *Dispatcher) GrantSubmitDirect(grantee awsiam.IGrantable) awsiam.Grant {
	queues, dlqs := d.queueARNs()
	return combine(
		grantOn(grantee, []string{*d.Table.TableArn()}, "dynamodb:GetItem", "dynamodb:PutItem"),
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
			Grantee:      grantee,
			Actions:      jsii.Strings("dynamodb:UpdateItem", "dynamodb:DeleteItem"),
			ResourceArns: jsii.Strings(*d.Table.TableArn()),
			Conditions: &map[string]*map[string]interface{}{
				"ForAllValues:StringLike": {"dynamodb:LeadingKeys": []string{spec.BatchKeyPrefix + "*"}},
			},
		}),
		grantOn(grantee, queues, "sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"),
		grantOn(grantee, dlqs, "sqs:GetQueueAttributes", "sqs:GetQueueUrl"),
		grantOn(grantee, []string{d.objectsARN()}, "s3:PutObject", "s3:DeleteObject"),
	)
}

// GrantSendMessages lets grantee send raw task messages,
// {"type":"...","payload":{...}}, to the three priority queues with the
// AWS SDK: sqs:SendMessage (which also covers SendMessageBatch) and
// nothing else. The consumer adopts each message as a task. The queue URLs
// are in ProducerEnvironment (TRIAGE_QUEUE_URL_<PRIORITY>). Unlike the
// awssqs queues' own GrantSendMessages it gives no GetQueueAttributes or
// GetQueueUrl: a raw producer needs neither.
func (d *Dispatcher) GrantSendMessages(grantee awsiam.IGrantable) awsiam.Grant {
	queues, _ := d.queueARNs()
	return grantOn(grantee, queues, "sqs:SendMessage")
}

// GrantConsume lets grantee run tasks as a consumer: a consumer built on
// the worker package (github.com/triagehq/triage/worker) that runs outside
// the stack's consumer function, on ECS or EC2 for example. It is exactly
// the stock consumer function's policy, which the construct grants with
// this method too:
//
//   - read and write the table and its indexes (claims, leases, results,
//     retries, the indexes' queries, pause and limit controls);
//   - s3:PutObject, s3:GetObject and s3:DeleteObject on the bucket's t/
//     objects (large payloads it reads, large results and adopted raw
//     messages' payloads it writes, objects of refused writes it removes);
//   - sqs:ReceiveMessage, DeleteMessage, ChangeMessageVisibility,
//     SendMessage and GetQueueAttributes on the queues (receive and settle
//     messages, retry waits, re-sends);
//   - sqs:SendMessage on the DLQs (dead letters), and nothing else on them;
//   - lambda:InvokeFunction on the Lambda handlers in Props.Routes, if any.
//
// Give it ConsumerEnvironment too.
func (d *Dispatcher) GrantConsume(grantee awsiam.IGrantable) awsiam.Grant {
	queues, dlqs := d.queueARNs()
	grants := []awsiam.Grant{
		d.Table.GrantReadWriteData(grantee),
		grantOn(grantee, []string{d.objectsARN()}, "s3:PutObject", "s3:GetObject", "s3:DeleteObject"),
		grantOn(grantee, queues, "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:SendMessage", "sqs:GetQueueAttributes"),
		grantOn(grantee, dlqs, "sqs:SendMessage"),
	}
	if len(d.handlers) > 0 {
		grants = append(grants, grantOn(grantee, d.handlers, "lambda:InvokeFunction"))
	}
	return combine(grants...)
}

// GrantInvokeApi lets grantee call the task API, /api/v1/*, with any
// method: execute-api:Invoke on the API route (through the route's own
// GrantInvoke), not on the dashboard's routes, which only a browser uses
// and a browser cannot sign. The calls must still carry a bearer token (in
// X-Triage-Token, since SigV4 owns the Authorization header).
//
// It needs Props.IAMAuth and panics without it, as the CDK's own route
// grants do: without IAM authorization on the routes, execute-api:Invoke
// would grant nothing.
func (d *Dispatcher) GrantInvokeApi(grantee awsiam.IGrantable) awsiam.Grant {
	if !d.iamAuth {
		panic(fmt.Errorf("dispatcher %s: GrantInvokeApi needs Props.IAMAuth: without IAM authorization on the routes, execute-api:Invoke grants nothing (callers need only a bearer token)", *d.Node().Id()))
	}
	return d.apiRoute.GrantInvoke(grantee, nil)
}

// queueARNs returns the ARNs of the queues and of the DLQs, in the spec's
// priority order.
func (d *Dispatcher) queueARNs() (queues, dlqs []string) {
	for _, q := range d.Queues {
		queues = append(queues, *q.Queue.QueueArn())
		dlqs = append(dlqs, *q.DLQ.QueueArn())
	}
	return queues, dlqs
}

// objectsARN matches the bucket's objects under t/, the only ones triage
// writes (internal/blob's keys).
func (d *Dispatcher) objectsARN() string { return *d.Bucket.ArnForObjects(jsii.String("t/*")) }

// grantOn grants actions on resources to grantee's principal policy.
func grantOn(grantee awsiam.IGrantable, resources []string, actions ...string) awsiam.Grant {
	return awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee:      grantee,
		Actions:      jsii.Strings(actions...),
		ResourceArns: jsii.Strings(resources...),
	})
}

// combine joins grants into one, as the CDK's multi-resource grants do.
func combine(grants ...awsiam.Grant) awsiam.Grant {
	g := grants[0]
	for _, other := range grants[1:] {
		g = g.Combine(other)
	}
	return g
}
