package triagetype

import "time"

// Promotion is one aging step of a task: the promoter moved it From one
// priority To the next At a time, after it had waited WaitedMS
// milliseconds at From (the wait the aging threshold is measured on).
// The dynamodbav names are the stored item's: short, and At in Unix
// seconds, so that a step adds about 35 bytes to the task's record.
type Promotion struct {
	From     Priority  `json:"from" dynamodbav:"f"`
	To       Priority  `json:"to" dynamodbav:"t"`
	At       time.Time `json:"at" dynamodbav:"at,unixtime"`
	WaitedMS int64     `json:"waited_ms" dynamodbav:"w"`
}
