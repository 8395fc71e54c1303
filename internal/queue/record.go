package queue

import (
	"fmt"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// FromRecord turns a record of an SQS event (what a Lambda event source
// mapping hands a function) into the message a receive of that queue
// returns: the priority is the one whose queue the record's
// eventSourceARN names, and the receipt handle works for Delete and
// ChangeVisibility. A record from a queue that is none of the three is an
// error.
func (q *Queues) FromRecord(r events.SQSMessage) (Received, error) {
	name := r.EventSourceARN[strings.LastIndex(r.EventSourceARN, ":")+1:]
	for p, u := range q.urls {
		if name != "" && queueName(u) == name {
			m := Received{Priority: p, MessageID: r.MessageId, ReceiptHandle: r.ReceiptHandle, Body: r.Body}
			m.ReceiveCount, _ = strconv.Atoi(r.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
			if ms, err := strconv.ParseInt(r.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
				m.SentAt = time.UnixMilli(ms)
			}
			if a, ok := r.MessageAttributes[ReasonAttribute]; ok && a.StringValue != nil {
				m.Reason = *a.StringValue
			}
			if a, ok := r.MessageAttributes[TraceparentAttribute]; ok && a.StringValue != nil {
				m.Traceparent = *a.StringValue
			}
			if a, ok := r.MessageAttributes[FirstSentAttribute]; ok && a.StringValue != nil {
				if ms, err := strconv.ParseInt(*a.StringValue, 10, 64); err == nil {
					m.FirstSentAt = time.UnixMilli(ms)
				}
			}
			return m, nil
		}
	}
	return Received{}, fmt.Errorf("record %s: event source %q is none of the priority queues", r.MessageId, r.EventSourceARN)
}

// ARN is the queue ARN of a queue URL
// (https://sqs.<region>.amazonaws.com/<account>/<name>, or an emulator's
// http://host:port/<account>/<name>), with region filling in when the
// host names none: the eventSourceARN SQS events carry.
func ARN(u, region string) string {
	account, name := "000000000000", queueName(u)
	if pu, err := url.Parse(u); err == nil {
		if parts := strings.Split(strings.Trim(pu.Path, "/"), "/"); len(parts) == 2 {
			account = parts[0]
		}
		if h := strings.Split(pu.Hostname(), "."); len(h) >= 3 && h[0] == "sqs" {
			region = h[1]
		}
	}
	return "arn:aws:sqs:" + region + ":" + account + ":" + name
}

// queueName is the last path element of a queue URL: the queue's name.
func queueName(u string) string {
	if pu, err := url.Parse(u); err == nil {
		return path.Base(pu.Path)
	}
	return path.Base(u)
}
