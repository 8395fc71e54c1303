package triagetype

import "time"

// Promotion is one aging step of a task: the promoter moved it From one
// priority To the next At a time, after it had waited WaitedMS
// milliseconds at From (the wait the aging threshold is measured on).
type Promotion struct {
	From     Priority  `json:"from"`
	To       Priority  `json:"to"`
	At       time.Time `json:"at"`
	WaitedMS int64     `json:"waited_ms"`
}
